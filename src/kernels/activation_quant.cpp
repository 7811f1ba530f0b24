#include "kernels/activation_quant.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace minfer {
namespace {

// ggml's nearest_int: round half to even through the float magic number (|v| < 2^22).
inline int nearest_int(float v) {
    const float shifted = v + 12582912.f;
    const int32_t bits = std::bit_cast<int32_t>(shifted);
    return (bits & 0x007fffff) - 0x00400000;
}

// Quantizes one block of 32 the way ggml's AVX2 code does; returns sum(q) for Q8_1.
inline int quantize_block_of_32(const float* x, int8_t* q, float& d) {
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    d = amax / 127.f;
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        // _mm256_round_ps(_MM_ROUND_NEAREST) is round half to even, as nearbyint is by default.
        const int v = static_cast<int>(std::nearbyint(x[j] * id));
        q[j] = static_cast<int8_t>(v);
        sum += v;
    }
    return sum;
}

}  // namespace

GgmlType activation_type(GgmlType weight_type) {
    switch (weight_type) {
        case GgmlType::F32:
            return GgmlType::F32;
        case GgmlType::F16:
            return GgmlType::F16;
        case GgmlType::BF16:
            return GgmlType::BF16;
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::IQ4_NL:
            return GgmlType::Q8_0;
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
            return GgmlType::Q8_1;
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K:
        case GgmlType::IQ4_XS:
        case GgmlType::TQ1_0:
        case GgmlType::TQ2_0:
            return GgmlType::Q8_K;
        default:
            throw UnsupportedError(
                concat("matmul does not support weights of type ", type_name(weight_type)));
    }
}

void quantize_activations_q8_0(const float* x, block_q8_0* y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_0; ++b) {
        float d = 0.0f;
        quantize_block_of_32(x + b * QK8_0, y[b].qs, d);
        y[b].d = f32_to_f16(d);
    }
}

void quantize_activations_q8_1(const float* x, block_q8_1* y, int64_t n) {
    for (int64_t b = 0; b < n / QK8_1; ++b) {
        float d = 0.0f;
        const int sum = quantize_block_of_32(x + b * QK8_1, y[b].qs, d);
        y[b].d = f32_to_f16(d);
        y[b].s = f32_to_f16(d * static_cast<float>(sum));
    }
}

void quantize_activations_q8_K(const float* x, block_q8_K* y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        block_q8_K& out = y[b];
        float max = 0.0f;
        float amax = 0.0f;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            out.d = 0.0f;
            std::memset(out.qs, 0, sizeof(out.qs));
            std::memset(out.bsums, 0, sizeof(out.bsums));
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j) {
            const int v = nearest_int(iscale * x[j]);
            out.qs[j] = static_cast<int8_t>(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += out.qs[j * 16 + i];
            out.bsums[j] = static_cast<int16_t>(sum);
        }
        out.d = 1 / iscale;
    }
}

void round_activations_f16(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(f32_to_f16(x[i]));
}

void round_activations_bf16(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

}  // namespace minfer
