#pragma once
// Attention over the paged KV cache for one token and one K/V head (all the query heads that
// share it), with ggml's rounding for attention without flash-attention (what llama.cpp's
// reference outputs used; see kernels/attention.h). An f16 or f32 cache runs the SIMD kernel on
// the sequence's blocks; a q8_0 cache quantizes the query to q8_0 blocks as ggml does and runs a
// scalar loop.

#include <cstdint>
#include <span>
#include <vector>

#include "backend/cpu/kv_pool.h"
#include "kernels/attention.h"
#include "model/graph.h"

namespace minfer {

// Per-thread scratch, grown on first use.
struct AttentionWorkspace {
    AttentionScratch kernel;
    std::vector<const void*> k_tiles, v_tiles;  // the tiles of one call
    std::vector<float> scores;                  // [keys] (q8_0 cache)
};

// The heads of K/V head `kv_head` for the token at position `pos` whose sequence's blocks are
// `table`: queries q_token[n_head * head_dim_k], outputs out_token[n_head * head_dim_v]; keys at
// positions max(0, pos - window + 1) .. pos of cache layer `layer`.
void attend_kv_group(const AttentionParams& a, const CpuKvPool& kv, int layer, int64_t kv_head,
                     int64_t pos, std::span<const int32_t> table, const float* q_token,
                     float* out_token, AttentionWorkspace& ws);

}  // namespace minfer
