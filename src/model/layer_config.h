#pragma once
// What each transformer block of a model computes, as plain data (the way gemma.cpp keeps
// LayerConfigs): head counts and sizes, the attention window, RoPE, which optional tensors the
// block has. An architecture fills one per layer from the GGUF metadata; the graph builders read
// nothing else, so per-layer differences (sliding-window layers, per-layer RoPE bases, head
// counts) need no flags spread through the code.

#include <cstdint>

#include "kernels/rope_style.h"

namespace minfer {

struct RopeParams {
    RopeStyle style = RopeStyle::kNormal;
    int64_t n_dims = 0;  // leading values of each head that rotate (even, <= head size)
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;   // 1 / linear scaling factor: positions are multiplied by it
    float attn_factor = 1.0f;  // multiplies cos and sin (LongRoPE's magnitude correction)
};

enum class FfnActivation : uint8_t {
    kSilu,      // SwiGLU (llama, qwen, phi3, the experts of MoE layers)
    kGeluTanh,  // GELU with the tanh approximation (gemma)
};

// Where attn_scale is applied.
enum class AttnScaling : uint8_t {
    kScores,  // the attention scales Q·K (llama, qwen)
    kQuery,   // Q is multiplied before attention, in f32, and the attention scales by 1 (as
              // llama.cpp's gemma and phi3 graphs do)
};

// How the Q, K and V projections are stored.
enum class QkvLayout : uint8_t {
    kSeparate,  // attn_q, attn_k, attn_v
    kFused,     // one attn_qkv matrix: Q rows, then K, then V (phi3)
};

// How the gated feed-forward's gate and up projections are stored.
enum class GateUpLayout : uint8_t {
    kSeparate,  // ffn_gate, ffn_up
    kFused,     // ffn_up holds the gate rows, then the up rows (phi3)
};

// Where the block's RMSNorms sit.
enum class NormPlacement : uint8_t {
    kPre,         // attn_norm and ffn_norm on the block inputs
    kPreAndPost,  // also post_attention_norm and post_ffw_norm on the block outputs (gemma)
};

struct LayerConfig {
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim_k = 0;
    int64_t head_dim_v = 0;
    int64_t n_ff = 0;
    RopeParams rope;
    float attn_scale = 1.0f;    // multiplies Q·K (1/sqrt(head_dim_k) unless the model says)
    float attn_softcap = 0.0f;  // 0: none; else scores become softcap * tanh(score / softcap)
    int64_t attn_window = 0;    // 0: every earlier position; else only the last attn_window
    AttnScaling attn_scaling = AttnScaling::kScores;
    QkvLayout qkv_layout = QkvLayout::kSeparate;
    GateUpLayout gate_up_layout = GateUpLayout::kSeparate;
    NormPlacement norms = NormPlacement::kPre;
    bool qkv_bias = false;  // attn_{q,k,v}.bias present (qwen2)
    bool qk_norm = false;   // per-head RMSNorm of Q and K before RoPE (qwen3, gemma3)
    FfnActivation ffn_act = FfnActivation::kSilu;
    // Mixture of experts (n_expert > 0): a router ffn_gate_inp and 3-D expert tensors
    // ffn_{gate,up,down}_exps; n_ff is then the width of one expert.
    int64_t n_expert = 0;
    int64_t n_expert_used = 0;

    int64_t q_width() const { return n_head * head_dim_k; }      // Q projection output
    int64_t kv_width() const { return n_head_kv * head_dim_k; }  // K projection output
    int64_t v_width() const { return n_head_kv * head_dim_v; }   // V projection output
    int64_t attn_out_width() const { return n_head * head_dim_v; }
};

}  // namespace minfer
