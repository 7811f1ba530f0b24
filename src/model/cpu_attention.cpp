#include "model/cpu_attention.h"

#include <algorithm>
#include <cmath>

#include "core/half.h"
#include "kernels/activation_quant.h"
#include "quant/block_types.h"

namespace minfer {
namespace {

float dot_q8_0(const block_q8_0* a, const block_q8_0* b, int64_t n) {
    float sum = 0.0f;
    for (int64_t blk = 0; blk < n / QK8_0; ++blk) {
        int32_t isum = 0;
        for (int i = 0; i < QK8_0; ++i) isum += a[blk].qs[i] * b[blk].qs[i];
        sum += f16_to_f32(a[blk].d) * f16_to_f32(b[blk].d) * static_cast<float>(isum);
    }
    return sum;
}

// One query head over a q8_0 cache: the query is quantized to q8_0 (ggml's dot type for q8_0).
void attend_head_q8_0(const AttentionShape& s, const KvCache& kv, int layer, int64_t kv_head,
                      int64_t n_keys, const float* q, float* out, AttentionWorkspace& ws) {
    const std::size_t k_head_bytes = row_size(GgmlType::Q8_0, s.head_dim_k);
    const std::size_t v_head_bytes = row_size(GgmlType::Q8_0, s.head_dim_v);
    ws.scores.resize(static_cast<std::size_t>(n_keys));
    ws.q_q8.resize(k_head_bytes);
    const auto* q8 = reinterpret_cast<block_q8_0*>(ws.q_q8.data());
    quantize_activations_q8_0(q, reinterpret_cast<block_q8_0*>(ws.q_q8.data()), s.head_dim_k);
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim_k));
    float max_score = -INFINITY;
    for (int64_t p = 0; p < n_keys; ++p) {
        const auto* k = reinterpret_cast<const block_q8_0*>(
            kv.k_row(layer, p) + static_cast<std::size_t>(kv_head) * k_head_bytes);
        ws.scores[static_cast<std::size_t>(p)] = dot_q8_0(q8, k, s.head_dim_k) * scale;
        max_score = std::max(max_score, ws.scores[static_cast<std::size_t>(p)]);
    }
    double sum = 0.0;
    for (auto& e : ws.scores) {
        e = std::exp(e - max_score);
        sum += e;
    }
    std::fill(out, out + s.head_dim_v, 0.0f);
    for (int64_t p = 0; p < n_keys; ++p) {
        const float weight = static_cast<float>(ws.scores[static_cast<std::size_t>(p)] / sum);
        const auto* b = reinterpret_cast<const block_q8_0*>(
            kv.v_row(layer, p) + static_cast<std::size_t>(kv_head) * v_head_bytes);
        for (int64_t i = 0; i < s.head_dim_v; ++i)
            out[i] += weight * f16_to_f32(b[i / QK8_0].d) * b[i / QK8_0].qs[i % QK8_0];
    }
}

}  // namespace

void attend_kv_group(const AttentionShape& s, const KvCache& kv, int layer, int64_t kv_head,
                     int64_t pos, const float* q_token, float* out_token, AttentionWorkspace& ws) {
    const int64_t group = s.group();
    const float* q = q_token + kv_head * group * s.head_dim_k;
    float* out = out_token + kv_head * group * s.head_dim_v;
    const int64_t n_keys = pos + 1;
    if (kv.type() == GgmlType::Q8_0) {
        for (int64_t m = 0; m < group; ++m) {
            attend_head_q8_0(s, kv, layer, kv_head, n_keys, q + m * s.head_dim_k,
                             out + m * s.head_dim_v, ws);
        }
        return;
    }
    AttentionGroup a;
    a.q = q;
    a.q_stride = s.head_dim_k;
    a.group = group;
    a.f16 = kv.type() == GgmlType::F16;
    a.k_tiles = kv.k_tiles(layer, kv_head);
    a.v_rows = kv.v_rows(layer, kv_head);
    a.n_keys = n_keys;
    a.head_dim_k = s.head_dim_k;
    a.head_dim_v = s.head_dim_v;
    a.scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim_k));
    a.out = out;
    a.out_stride = s.head_dim_v;
    attend_group(a, ws.kernel);
}

}  // namespace minfer
