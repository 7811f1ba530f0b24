#pragma once
// The model's weights, bound by name from the GGUF tensor table with their shapes and types
// checked. Each Weight is a view into the mapped file: binding copies no weight data.

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/hparams.h"

namespace minfer {

struct Weight {
    const TensorInfo* info = nullptr;  // null when an optional tensor is absent

    explicit operator bool() const { return info != nullptr; }
    GgmlType type() const { return info->type; }
    int64_t n_cols() const { return info->ne[0]; }  // row length (input width of a matrix)
    int64_t n_rows() const { return info->ne[1]; }  // output width of a matrix
    std::span<const std::byte> data() const { return info->data; }
    // A 1-D F32 tensor (norm weights, biases) as floats.
    const float* f32() const { return reinterpret_cast<const float*>(info->data.data()); }
};

struct LayerWeights {
    Weight attn_norm;  // [n_embd] f32
    Weight wq, wk, wv,
        wo;             // [n_embd -> q_width], [-> kv_width], [-> v_width], [attn_out -> n_embd]
    Weight bq, bk, bv;  // optional biases [q_width], [kv_width], [v_width]
    Weight q_norm, k_norm;    // optional per-head norms [head_dim_k]
    Weight ffn_norm;          // [n_embd]
    Weight ffn_gate, ffn_up;  // [n_embd -> n_ff]
    Weight ffn_down;          // [n_ff -> n_embd]
};

struct ModelWeights {
    Weight token_embd;   // [n_embd, n_vocab]: row t is token t's embedding
    Weight output_norm;  // [n_embd]
    Weight output;       // [n_embd -> n_vocab]; token_embd when the file ties them
    Weight rope_freqs;   // optional [n_rot / 2] f32: per-frequency divisors (Llama 3.1 scaling)
    bool tied_output = false;
    std::vector<LayerWeights> layers;
};

// Binds every tensor the architecture needs; sets hp.n_vocab from token_embd.weight. Throws
// FormatError naming a missing or wrongly shaped tensor and the shape expected, UnsupportedError
// for a tensor type the kernels cannot use.
ModelWeights bind_weights(const GgufFile& file, const Architecture& arch, HParams& hp);

}  // namespace minfer
