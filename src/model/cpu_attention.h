#pragma once
// Causal grouped-query attention of one query head over the KV cache, with ggml's rounding (its
// attention without flash-attention, which llama.cpp's reference outputs used): the query is
// rounded to the cache's type before the Q·K dot products (f16, or q8_0 blocks), scores are scaled
// by 1/sqrt(head_dim), softmax sums in double, and for an f16 cache the probabilities are rounded
// to f16 before they weigh V. (Without that last rounding the stories260K deviation triples.)

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"

namespace minfer {

struct AttentionShape {
    int64_t n_head;
    int64_t n_head_kv;
    int64_t head_dim_k;
    int64_t head_dim_v;
};

// Per-thread scratch, grown on first use.
struct AttentionWorkspace {
    std::vector<float> scores;       // [n_ctx]
    std::vector<uint16_t> q_f16;     // [head_dim_k]
    std::vector<std::byte> q_q8;     // head_dim_k / 32 q8_0 blocks
};

// out[head_dim_v] = attention of query q[head_dim_k] (head `head`) at position `pos` over cache
// positions 0..pos of `layer`.
void attend_one_head(const AttentionShape& shape, const KvCache& kv, int layer, int64_t head, int64_t pos,
                     const float* q, float* out, AttentionWorkspace& ws);

// Writes n values as q8_0 blocks (a KV cache row).
void quantize_kv_row_q8_0(const float* x, std::byte* dst, int64_t n);

}  // namespace minfer
