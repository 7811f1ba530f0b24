#pragma once
// Causal grouped-query attention over the KV cache for one token and one K/V head (all the query
// heads that share it), with ggml's rounding for attention without flash-attention (what
// llama.cpp's reference outputs used; see kernels/attention.h). An f16 or f32 cache runs the SIMD
// kernel; a q8_0 cache quantizes the query to q8_0 blocks as ggml does and runs a scalar loop.

#include <cstdint>
#include <vector>

#include "kernels/attention.h"
#include "model/kv_cache.h"

namespace minfer {

struct AttentionShape {
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim_k;
    int64_t head_dim_v;
    int64_t group() const { return n_head / n_head_kv; }
};

// Per-thread scratch, grown on first use.
struct AttentionWorkspace {
    AttentionScratch kernel;
    std::vector<float> scores;    // [n_ctx] (q8_0 cache)
    std::vector<std::byte> q_q8;  // head_dim_k / 32 q8_0 blocks (q8_0 cache)
};

// out_token[attn_out_width] gets the heads of K/V head `kv_head` for the token at `pos`, whose
// queries are q_token[q_width]; keys and values at cache positions 0..pos of `layer`.
void attend_kv_group(const AttentionShape& shape, const KvCache& kv, int layer, int64_t kv_head,
                     int64_t pos, const float* q_token, float* out_token, AttentionWorkspace& ws);

}  // namespace minfer
