#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "kernels/ops.h"
#include "quant/block_types.h"

namespace minfer {
namespace {

// q · k for an f32 query and a q8_0 key, block by block.
float dot_f32_q8_0(const float* q, const block_q8_0* k, int64_t n) {
    float sum = 0.0f;
    for (int64_t blk = 0; blk < n / QK8_0; ++blk) {
        float block_sum = 0.0f;
        for (int i = 0; i < QK8_0; ++i) block_sum += q[blk * QK8_0 + i] * k[blk].qs[i];
        sum += f16_to_f32(k[blk].d) * block_sum;
    }
    return sum;
}

// The cache slot of position p of the sequence with block table `table`.
int64_t slot_of(std::span<const int32_t> table, int64_t p, int64_t block_size) {
    return int64_t{table[static_cast<std::size_t>(p / block_size)]} * block_size + p % block_size;
}

// One query head over a q8_0 cache, keys [first, last]. The query stays f32: ggml quantizes it to
// q8_0 as well, which alone doubles the deviation from an f16 cache on tiny-qwen2-f16 (0.11 -> 0.14
// in log-probabilities).
void attend_head_q8_0(const AttentionParams& s, const CpuKvPool& kv, int layer, int64_t kv_head,
                      int64_t first, int64_t last, std::span<const int32_t> table, const float* q,
                      float* out, AttentionWorkspace& ws) {
    const int64_t block_size = kv.spec().block_size;
    const std::size_t k_head_bytes = row_size(GgmlType::Q8_0, s.head_dim_k);
    const std::size_t v_head_bytes = row_size(GgmlType::Q8_0, s.head_dim_v);
    const int64_t n_keys = last - first + 1;
    ws.scores.resize(static_cast<std::size_t>(n_keys));
    float max_score = -INFINITY;
    for (int64_t i = 0; i < n_keys; ++i) {
        const auto* k = reinterpret_cast<const block_q8_0*>(
            kv.k_row(layer, slot_of(table, first + i, block_size)) +
            static_cast<std::size_t>(kv_head) * k_head_bytes);
        float score = dot_f32_q8_0(q, k, s.head_dim_k) * s.scale;
        if (s.softcap > 0.0f) score = soft_cap(score, s.softcap);
        ws.scores[static_cast<std::size_t>(i)] = score;
        max_score = std::max(max_score, score);
    }
    double sum = 0.0;
    for (auto& e : ws.scores) {
        e = std::exp(e - max_score);
        sum += e;
    }
    std::fill(out, out + s.head_dim_v, 0.0f);
    for (int64_t i = 0; i < n_keys; ++i) {
        const float weight = static_cast<float>(ws.scores[static_cast<std::size_t>(i)] / sum);
        const auto* b = reinterpret_cast<const block_q8_0*>(
            kv.v_row(layer, slot_of(table, first + i, block_size)) +
            static_cast<std::size_t>(kv_head) * v_head_bytes);
        for (int64_t d = 0; d < s.head_dim_v; ++d)
            out[d] += weight * f16_to_f32(b[d / QK8_0].d) * b[d / QK8_0].qs[d % QK8_0];
    }
}

}  // namespace

void attend_kv_group(const AttentionParams& s, const CpuKvPool& kv, int layer, int64_t kv_head,
                     int64_t pos, std::span<const int32_t> table, const float* q_token,
                     float* out_token, AttentionWorkspace& ws) {
    const int64_t group = s.n_head / s.n_head_kv;
    const float* q = q_token + kv_head * group * s.head_dim_k;
    float* out = out_token + kv_head * group * s.head_dim_v;
    const int64_t first = s.first_position(pos);
    if (kv.spec().type == GgmlType::Q8_0) {
        for (int64_t m = 0; m < group; ++m) {
            attend_head_q8_0(s, kv, layer, kv_head, first, pos, table, q + m * s.head_dim_k,
                             out + m * s.head_dim_v, ws);
        }
        return;
    }
    // The blocks holding keys first .. pos, as tiles of the kernel.
    const int64_t block_size = kv.spec().block_size;
    const int64_t first_block = first / block_size, last_block = pos / block_size;
    ws.k_tiles.clear();
    ws.v_tiles.clear();
    for (int64_t b = first_block; b <= last_block; ++b) {
        const int32_t block = table[static_cast<std::size_t>(b)];
        ws.k_tiles.push_back(kv.k_tile(layer, block, kv_head));
        ws.v_tiles.push_back(kv.v_tile(layer, block, kv_head));
    }
    AttentionGroup a;
    a.q = q;
    a.q_stride = s.head_dim_k;
    a.group = group;
    a.f16 = kv.f16();
    a.k_tiles = ws.k_tiles.data();
    a.v_tiles = ws.v_tiles.data();
    a.skip = first - first_block * block_size;
    a.n_keys = pos + 1 - first_block * block_size;
    a.head_dim_k = s.head_dim_k;
    a.head_dim_v = s.head_dim_v;
    a.scale = s.scale;
    a.softcap = s.softcap;
    a.out = out;
    a.out_stride = s.head_dim_v;
    attend_group(a, ws.kernel);
}

}  // namespace minfer
