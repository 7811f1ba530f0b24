#pragma once
// The strict GGUF parser: reads the header, the metadata and the tensor table of one file held in
// memory (normally a read-only mapping), validates every count, length and offset before using
// it, and never reads the tensor data. Rules: ../shared/docs/seeds/gguf-kaitai-spec.txt, and
// stricter where the spec and ggml disagree.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_metadata.h"

namespace minfer {

inline constexpr uint32_t kGgufVersion = 3;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr std::size_t kGgmlMaxDims = 4;
inline constexpr std::size_t kGgmlMaxName = 64;  // a name holds at most 63 bytes (ggml adds a NUL)
inline constexpr uint64_t kGgufMaxStringLength = uint64_t{1} << 30;
inline constexpr uint64_t kGgufMaxArrayElements = uint64_t{1} << 30;
inline constexpr int kGgufMaxArrayDepth = 8;

struct TensorInfo {
    std::string name;
    GgmlType type = GgmlType::F32;
    uint32_t n_dims = 0;
    std::array<int64_t, kGgmlMaxDims> ne = {1, 1, 1, 1};   // elements per dimension
    std::array<uint64_t, kGgmlMaxDims> nb = {0, 0, 0, 0};  // byte strides, as ggml computes them
    uint64_t offset = 0;                                   // from the start of the data section
    uint64_t n_bytes = 0;                                  // unpadded size of the data
    std::span<const std::byte> data;                       // view into the file's bytes

    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
    std::string shape_string() const;  // "[4096, 32000]"
};

// One parsed GGUF file (one part of a split model).
struct GgufContents {
    uint32_t version = kGgufVersion;
    uint64_t n_kv = 0;
    uint32_t alignment = kGgufDefaultAlignment;
    uint64_t data_offset = 0;  // where the data section starts in the file
    uint64_t data_size = 0;    // bytes of the data section, each tensor padded to the alignment
    GgufMetadata metadata;
    std::vector<TensorInfo> tensors;
};

// Parses `file` (the whole file's bytes). Throws FormatError naming `file_name`, the offset, the
// key or tensor, and what was expected versus found.
GgufContents parse_gguf(std::span<const std::byte> file, const std::string& file_name);

inline uint64_t pad_to_alignment(uint64_t x, uint64_t alignment) {
    return (x + alignment - 1) & ~(alignment - 1);
}

}  // namespace minfer
