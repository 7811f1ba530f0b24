#pragma once
// Hyperparameters of a decoder model, read from the ARCH.* metadata keys with llama.cpp's
// defaults where a key is optional, and validated before any tensor is looked at.

#include <cstdint>
#include <string>

#include "gguf/gguf_metadata.h"
#include "model/layer_config.h"

namespace minfer {

struct HParams {
    std::string architecture;
    int64_t n_layer = 0;
    int64_t n_embd = 0;
    int64_t n_ff = 0;
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim_k = 0;   // attention.key_length (default n_embd / n_head)
    int64_t head_dim_v = 0;   // attention.value_length (default head_dim_k)
    int64_t n_rot = 0;        // rope.dimension_count: leading dims of each head that RoPE rotates
    int64_t n_ctx_train = 0;  // context_length
    int64_t n_vocab = 0;      // rows of token_embd.weight (set when the weights are bound)
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;  // 1 / linear scaling factor
    float rms_eps = 1e-5f;

    int64_t q_width() const { return n_head * head_dim_k; }      // Q projection output
    int64_t kv_width() const { return n_head_kv * head_dim_k; }  // K projection output
    int64_t v_width() const { return n_head_kv * head_dim_v; }   // V projection output
    int64_t attn_out_width() const { return n_head * head_dim_v; }
};

// Reads and validates the keys ARCH.*; throws FormatError naming the key and the rule broken,
// UnsupportedError for features minfer does not implement (e.g. YaRN scaling).
HParams read_hparams(const GgufMetadata& meta, std::string_view arch_name);

// The configuration every layer of a uniform decoder shares (llama, qwen2, qwen3): the global
// head counts and sizes, RoPE of `style` with the global base and scaling, 1/sqrt(head_dim_k).
LayerConfig uniform_layer_config(const HParams& hp, RopeStyle style);

}  // namespace minfer
