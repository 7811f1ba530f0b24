#pragma once
// Hyperparameters of a decoder model, read from the ARCH.* metadata keys with llama.cpp's
// defaults where a key is optional, and validated before any tensor is looked at.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"
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
    // rope.scaling.original_context_length (default n_ctx_train): a context beyond it takes
    // LongRoPE's long factors.
    int64_t n_ctx_orig = 0;
    int64_t n_vocab = 0;  // rows of token_embd.weight (set when the weights are bound)
    float rope_freq_base = 10000.0f;
    float rope_freq_scale = 1.0f;           // 1 / linear scaling factor
    std::optional<float> rope_attn_factor;  // rope.scaling.attn_factor, when the file has it
    float rms_eps = 1e-5f;
    int64_t sliding_window = 0;  // attention.sliding_window (0: none); which layers use it is
                                 // the architecture's rule
    // Mixture of experts: expert_count (0: a dense model), expert_used_count, and
    // expert_feed_forward_length (default feed_forward_length), the width of one expert.
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;
    int64_t n_ff_expert = 0;

    int64_t q_width() const { return n_head * head_dim_k; }      // Q projection output
    int64_t kv_width() const { return n_head_kv * head_dim_k; }  // K projection output
    int64_t v_width() const { return n_head_kv * head_dim_v; }   // V projection output
    int64_t attn_out_width() const { return n_head * head_dim_v; }
};

// Typed, range-checked access to the keys ARCH.*: every error names the file and the key.
class ArchKeys {
  public:
    ArchKeys(const GgufMetadata& meta, std::string_view arch) : meta_(meta), prefix_(arch) {}

    std::string key(std::string_view suffix) const { return concat(prefix_, ".", suffix); }
    bool contains(std::string_view suffix) const { return meta_.contains(key(suffix)); }

    // FormatError unless the key exists and lo <= value <= hi.
    int64_t required_int(std::string_view suffix, int64_t lo, int64_t hi) const;
    int64_t optional_int(std::string_view suffix, int64_t fallback, int64_t lo, int64_t hi) const;
    // A finite number in [lo, hi]; `fallback` when absent.
    double optional_number(std::string_view suffix, double fallback, double lo, double hi) const;
    std::optional<std::string_view> optional_string(std::string_view suffix) const;
    const GgufMetadata& metadata() const { return meta_; }

  private:
    [[noreturn]] void out_of_range(std::string_view suffix, const std::string& value,
                                   const std::string& expected) const;

    const GgufMetadata& meta_;
    std::string prefix_;
};

// Reads and validates the keys ARCH.*; throws FormatError naming the key and the rule broken,
// UnsupportedError for features minfer does not implement (e.g. YaRN scaling).
HParams read_hparams(const GgufMetadata& meta, std::string_view arch_name);

// The configuration every layer of a uniform decoder shares (llama, qwen2, qwen3): the global
// head counts and sizes, RoPE of `style` with the global base and scaling, 1/sqrt(head_dim_k),
// and the model's experts if it has any.
LayerConfig uniform_layer_config(const HParams& hp, RopeStyle style);

}  // namespace minfer
