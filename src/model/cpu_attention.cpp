#include "model/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/activation_quant.h"
#include "kernels/vector_ops.h"
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

// out += weight * (a cache row of n values).
void add_weighted_row(GgmlType type, float weight, const std::byte* src, float* out, int64_t n) {
    switch (type) {
        case GgmlType::F32: axpy_f32(weight, reinterpret_cast<const float*>(src), out, n); break;
        case GgmlType::F16: axpy_f16(weight, reinterpret_cast<const uint16_t*>(src), out, n); break;
        default: {
            const auto* b = reinterpret_cast<const block_q8_0*>(src);
            for (int64_t i = 0; i < n; ++i) out[i] += weight * f16_to_f32(b[i / QK8_0].d) * b[i / QK8_0].qs[i % QK8_0];
        }
    }
}

}  // namespace

void quantize_kv_row_q8_0(const float* x, std::byte* dst, int64_t n) {
    quantize_activations_q8_0(x, reinterpret_cast<block_q8_0*>(dst), n);
}

void attend_one_head(const AttentionShape& s, const KvCache& kv, int layer, int64_t head, int64_t pos,
                     const float* q, float* out, AttentionWorkspace& ws) {
    const int64_t kv_head = head / (s.n_head / s.n_head_kv);
    const int64_t n_keys = pos + 1;
    const GgmlType type = kv.type();
    ws.scores.resize(static_cast<std::size_t>(kv.n_ctx()));
    const std::size_t k_head_bytes = row_size(type, s.head_dim_k);
    const std::size_t v_head_bytes = row_size(type, s.head_dim_v);

    // Scores: q . k for every cached position, with q rounded as ggml rounds it for this type.
    if (type == GgmlType::F16) {
        ws.q_f16.resize(static_cast<std::size_t>(s.head_dim_k));
        convert_f32_to_f16(q, ws.q_f16.data(), s.head_dim_k);
    } else if (type == GgmlType::Q8_0) {
        ws.q_q8.resize(row_size(GgmlType::Q8_0, s.head_dim_k));
        quantize_activations_q8_0(q, reinterpret_cast<block_q8_0*>(ws.q_q8.data()), s.head_dim_k);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim_k));
    float max_score = -INFINITY;
    for (int64_t p = 0; p < n_keys; ++p) {
        const std::byte* k = kv.k_row(layer, p) + static_cast<std::size_t>(kv_head) * k_head_bytes;
        float dot;
        if (type == GgmlType::F16) {
            dot = dot_f16(ws.q_f16.data(), reinterpret_cast<const uint16_t*>(k), s.head_dim_k);
        } else if (type == GgmlType::Q8_0) {
            dot = dot_q8_0(reinterpret_cast<const block_q8_0*>(ws.q_q8.data()),
                           reinterpret_cast<const block_q8_0*>(k), s.head_dim_k);
        } else {
            dot = dot_f32(q, reinterpret_cast<const float*>(k), s.head_dim_k);
        }
        const float score = dot * scale;
        ws.scores[static_cast<std::size_t>(p)] = score;
        max_score = std::max(max_score, score);
    }

    // Softmax (sum in double, as ggml) and the weighted sum of values.
    double sum = 0.0;
    for (int64_t p = 0; p < n_keys; ++p) {
        const float e = std::exp(ws.scores[static_cast<std::size_t>(p)] - max_score);
        ws.scores[static_cast<std::size_t>(p)] = e;
        sum += e;
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    std::fill(out, out + s.head_dim_v, 0.0f);
    for (int64_t p = 0; p < n_keys; ++p) {
        float weight = ws.scores[static_cast<std::size_t>(p)] * inv_sum;
        // ggml multiplies V by the probabilities converted to V's dot type: f16 for an f16 cache.
        if (type == GgmlType::F16) weight = f16_to_f32(f32_to_f16(weight));
        add_weighted_row(type, weight, kv.v_row(layer, p) + static_cast<std::size_t>(kv_head) * v_head_bytes, out,
                         s.head_dim_v);
    }
}

}  // namespace minfer
