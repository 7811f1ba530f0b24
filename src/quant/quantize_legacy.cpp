// Quantization to the 32-value block types, reproducing ggml's reference quantizers bit for bit:
// same float operations in the same order, same rounding (see rounding.h for the conversions).

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/quantize.h"
#include "quant/quantize_impl.h"
#include "quant/rounding.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // bit-exactness with ggml: no fused multiply-add
#endif

namespace minfer::quant_detail {
namespace {

// The value of largest magnitude (the first one on ties), keeping its sign.
inline float signed_absmax(const float* x, int n) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; ++j) {
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    return max;
}

inline float absmax(const float* x, int n) {
    float amax = 0.0f;
    for (int j = 0; j < n; ++j) amax = std::max(amax, std::fabs(x[j]));
    return amax;
}

struct MinMax {
    float min;
    float max;
};

inline MinMax min_max(const float* x, int n) {
    MinMax r{FLT_MAX, -FLT_MAX};
    for (int j = 0; j < n; ++j) {
        if (x[j] < r.min) r.min = x[j];
        if (x[j] > r.max) r.max = x[j];
    }
    return r;
}

// ggml's (uint8_t)MIN(top, (int8_t)(v)), clamped below at 0 so that a pathological input (never
// a finite one with a finite scale) cannot spill into the neighbouring nibble.
inline uint8_t level(float v, int top) {
    return static_cast<uint8_t>(std::clamp<int>(low_byte(truncate_to_int(v)), 0, top));
}

inline void store_qh(uint8_t (&qh)[4], uint32_t bits) {
    std::memcpy(qh, &bits, sizeof(bits));
}

// Q4_0: d = max / -8 so that the value of largest magnitude maps to level 0 (-8 * d).
}  // namespace

block_q4_0 quantize_block_q4_0(const float* x) {
    const float d = signed_absmax(x, QK4_0) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q4_0 y{};
    y.d = f32_to_f16(d);
    for (int j = 0; j < QK4_0 / 2; ++j) {
        const uint8_t lo = level(x[j] * id + 8.5f, 15);
        const uint8_t hi = level(x[j + QK4_0 / 2] * id + 8.5f, 15);
        y.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    return y;
}

// Q4_1: 16 levels from min to max.
block_q4_1 quantize_block_q4_1(const float* x) {
    const MinMax range = min_max(x, QK4_1);
    const float d = (range.max - range.min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q4_1 y{};
    y.d = f32_to_f16(d);
    y.m = f32_to_f16(range.min);
    for (int j = 0; j < QK4_1 / 2; ++j) {
        const uint8_t lo = level((x[j] - range.min) * id + 0.5f, 15);
        const uint8_t hi = level((x[j + QK4_1 / 2] - range.min) * id + 0.5f, 15);
        y.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    return y;
}

block_q5_0 quantize_block_q5_0(const float* x) {
    const float d = signed_absmax(x, QK5_0) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q5_0 y{};
    y.d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; ++j) {
        const uint8_t lo = level(x[j] * id + 16.5f, 31);
        const uint8_t hi = level(x[j + QK5_0 / 2] * id + 16.5f, 31);
        y.qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        qh |= static_cast<uint32_t>(lo >> 4) << j;
        qh |= static_cast<uint32_t>(hi >> 4) << (j + QK5_0 / 2);
    }
    store_qh(y.qh, qh);
    return y;
}

// Q5_1: 32 levels from min to max. ggml converts with (uint8_t) here, without a MIN: the top
// level can round to 32, whose fifth bit then drops out (kept as ggml does; masking bits 0-4).
block_q5_1 quantize_block_q5_1(const float* x) {
    const MinMax range = min_max(x, QK5_1);
    const float d = (range.max - range.min) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q5_1 y{};
    y.d = f32_to_f16(d);
    y.m = f32_to_f16(range.min);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; ++j) {
        const auto lo = static_cast<uint8_t>(truncate_to_int((x[j] - range.min) * id + 0.5f));
        const auto hi =
            static_cast<uint8_t>(truncate_to_int((x[j + QK5_1 / 2] - range.min) * id + 0.5f));
        y.qs[j] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        qh |= static_cast<uint32_t>((lo & 0x10) >> 4) << j;
        qh |= static_cast<uint32_t>((hi & 0x10) >> 4) << (j + QK5_1 / 2);
    }
    store_qh(y.qh, qh);
    return y;
}

block_q8_0 quantize_block_q8_0(const float* x) {
    const float d = absmax(x, QK8_0) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q8_0 y{};
    y.d = f32_to_f16(d);
    for (int j = 0; j < QK8_0; ++j) y.qs[j] = low_byte(round_to_int(x[j] * id));
    return y;
}

block_q8_1 quantize_block_q8_1(const float* x) {
    const float d = absmax(x, QK8_1) / 127;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    block_q8_1 y{};
    y.d = f32_to_f16(d);
    int sum = 0;
    for (int j = 0; j < QK8_1; ++j) {
        y.qs[j] = low_byte(round_to_int(x[j] * id));
        sum += y.qs[j];
    }
    y.s = f32_to_f16(static_cast<float>(sum) * d);
    return y;
}

}  // namespace minfer::quant_detail
