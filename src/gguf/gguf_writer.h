#pragma once
// Writes GGUF v3 files: metadata of every type, then tensors of any ggml type with the data
// section and every tensor padded to the alignment (general.alignment, default 32), the layout
// llama.cpp reads. Tensor bytes are either given (a view the caller keeps alive until write) or
// produced at write time, one tensor at a time, so a quantizer never holds a whole model.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_metadata.h"

namespace minfer {

class GgufWriter {
  public:
    // Fills exactly the tensor's byte size.
    using Producer = std::function<void(std::span<std::byte> out)>;

    GgufWriter() : metadata_("gguf writer") {}

    GgufMetadata& metadata() { return metadata_; }
    const GgufMetadata& metadata() const { return metadata_; }
    // Sets general.alignment (a power of two); 32 is the default and needs no key.
    void set_alignment(uint32_t alignment);

    // Shape is ggml's ne order (ne[0] = row length). Throws Error on a bad name, shape or size.
    void add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape,
                    std::span<const std::byte> data);
    void add_tensor(std::string name, GgmlType type, std::vector<int64_t> shape, Producer producer);

    std::size_t tensor_count() const { return tensors_.size(); }

    void write(std::ostream& out) const;
    std::vector<std::byte> to_bytes() const;
    // Writes `path` directly (callers wanting atomicity write a temporary and rename).
    void write_file(const std::filesystem::path& path) const;

  private:
    struct PendingTensor {
        std::string name;
        GgmlType type;
        std::vector<int64_t> shape;
        uint64_t n_bytes;
        std::span<const std::byte> data;
        Producer producer;
    };
    uint32_t alignment() const;
    PendingTensor make_pending(std::string name, GgmlType type, std::vector<int64_t> shape);

    GgufMetadata metadata_;
    std::vector<PendingTensor> tensors_;
};

}  // namespace minfer
