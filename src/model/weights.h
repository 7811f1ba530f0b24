#pragma once
// Weights bound by name from the GGUF tensor table, with their shapes and types checked. A Weight
// is a view into the mapped file (binding copies no weight data): a whole tensor, or a slice of
// one (the rows of one part of a fused tensor, one expert of a 3-D expert tensor). The binder
// records what it bound, so the bytes read per decoded token follow from the bindings and no
// list of weights has to be kept by hand.

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace minfer {

struct Weight {
    const TensorInfo* info = nullptr;  // the tensor it views; null when an optional one is absent
    GgmlType type = GgmlType::F32;
    std::array<int64_t, 4> ne = {1, 1, 1, 1};  // elements per dimension (ne[0]: row length)
    int n_dims = 0;
    std::span<const std::byte> data;  // the viewed bytes

    explicit operator bool() const { return info != nullptr; }
    const std::string& name() const { return info->name; }
    int64_t n_cols() const { return ne[0]; }  // row length (input width of a matrix)
    int64_t n_rows() const { return ne[1]; }  // output width of a matrix
    int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
    // A 1-D F32 tensor (norm weights, biases) as floats.
    const float* f32() const { return reinterpret_cast<const float*>(data.data()); }
    // "q8_0 [256, 768]"; "q8_0 [256, 768] rows 256..511 of blk.0.attn_qkv.weight" for a slice.
    std::string describe() const;

    // Rows [begin, begin + count) of a 2-D matrix (a part of a fused tensor).
    Weight rows(int64_t begin, int64_t count) const;
    // Matrix `index` of a 3-D tensor [cols, rows, n] (one expert).
    Weight matrix(int64_t index) const;
};

// Binds tensors of one file, checking shapes and types, and keeps the list of what it bound.
class WeightBinder {
  public:
    explicit WeightBinder(const GgufFile& file) : file_(file) {}

    // A matrix [n_cols -> n_rows] of any type the kernels handle.
    Weight matrix(const std::string& name, int64_t n_cols, int64_t n_rows, bool required = true);
    // An N-D tensor of the given shape (ne[0] first), any supported type (expert tensors).
    Weight tensor(const std::string& name, std::span<const int64_t> shape, bool required = true);
    // A 3-D expert tensor [n_cols, n_rows, n_expert] of which a decoded token reads n_used
    // matrices (the experts its router picks).
    Weight experts(const std::string& name, int64_t n_cols, int64_t n_rows, int64_t n_expert,
                   int64_t n_used);
    // A vector [n] of f32 (norm weights, biases, RoPE frequency factors).
    Weight vector(const std::string& name, int64_t n, bool required = true);
    // The embedding table [n_embd, n_vocab]: one row is read per token.
    Weight embeddings(const std::string& name, int64_t n_embd, int64_t n_vocab);

    // Bytes of weights read to decode one token: every bound tensor once, n_used of the n_expert
    // matrices of an expert tensor, the embedding table as one row unless it is also bound as a
    // matrix (a tied output reads all of it).
    uint64_t bytes_per_token() const;

  private:
    const TensorInfo* find(const std::string& name, bool required, const std::string& shape) const;
    Weight view(const TensorInfo& t) const;

    const GgufFile& file_;
    std::vector<const TensorInfo*> read_whole_;  // every bound tensor read in full per token
    std::vector<const TensorInfo*> looked_up_;   // embedding tables: one row per token
    struct PartlyRead {
        const TensorInfo* tensor;
        int64_t n_used, n_expert;
    };
    std::vector<PartlyRead> experts_;  // expert tensors: n_used of n_expert matrices per token
};

}  // namespace minfer
