// Quantization to the K-quants (super-blocks of 256 values), following ggml's reference
// quantizers (quantize_row_qN_K_ref: what llama-quantize runs without an importance matrix):
// search a scale (and min) per sub-block, quantize those to 4, 6 or 8 bits against one f16
// super-block scale, then re-level every value against the scales as stored.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "quant/k_scales.h"
#include "quant/quantize.h"
#include "quant/quantize_impl.h"
#include "quant/rounding.h"
#include "quant/scale_search.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // same rounding as ggml: no fused multiply-add
#endif

namespace minfer::quant_detail {
namespace {

inline int clamp_level(int l, int lo, int hi) {
    return std::max(lo, std::min(hi, l));
}

// Packs 256 2-bit levels as Q2_K and Q3_K store them: byte l of the 32-byte row of half h holds
// levels 128h + l, +32, +64, +96 in bit pairs 0-1, 2-3, 4-5, 6-7.
void pack_2bit(const uint8_t* levels, uint8_t* qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] =
                static_cast<uint8_t>(levels[j + l] | (levels[j + l + 32] << 2) |
                                     (levels[j + l + 64] << 4) | (levels[j + l + 96] << 6));
        }
    }
}

}  // namespace

block_q2_K quantize_block_q2_K(const float* x) {
    uint8_t levels[QK_K];
    uint8_t scratch[16];
    float weights[16];
    float scales[QK_K / 16];
    float mins[QK_K / 16];
    float max_scale = 0;  // scales are positive as the min is taken out
    float max_min = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
        scales[j] = search_scale_and_min(16, 3, x + 16 * j, weights, levels + 16 * j, &mins[j],
                                         scratch, -0.5f, 0.1f, 15, true);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }

    block_q2_K y{};
    if (max_scale > 0) {
        const float iscale = 15.f / max_scale;
        for (int j = 0; j < QK_K / 16; ++j) {
            y.scales[j] = static_cast<uint8_t>(nearest_int(iscale * scales[j]));
        }
        y.d = f32_to_f16(max_scale / 15.f);
    } else {
        y.d = f32_to_f16(0.f);
    }
    if (max_min > 0) {
        const float iscale = 15.f / max_min;
        for (int j = 0; j < QK_K / 16; ++j) {
            const int l = nearest_int(iscale * mins[j]);
            y.scales[j] = static_cast<uint8_t>(y.scales[j] | (l << 4));
        }
        y.dmin = f32_to_f16(max_min / 15.f);
    } else {
        y.dmin = f32_to_f16(0.f);
    }

    const float d_all = f16_to_f32(y.d);
    const float dmin_all = f16_to_f32(y.dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * static_cast<float>(y.scales[j] & 0xF);
        if (d == 0.0f) continue;  // keeps the levels of the search
        const float dm = dmin_all * static_cast<float>(y.scales[j] >> 4);
        for (int l = 0; l < 16; ++l) {
            levels[16 * j + l] =
                static_cast<uint8_t>(clamp_level(nearest_int((x[16 * j + l] + dm) / d), 0, 3));
        }
    }
    pack_2bit(levels, y.qs);
    return y;
}

block_q3_K quantize_block_q3_K(const float* x) {
    int8_t levels[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0;  // the scale of largest magnitude, signed
    float amax = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        scales[j] = search_symmetric_scale_q3(16, 4, x + 16 * j, levels + 16 * j);
        if (std::fabs(scales[j]) > amax) {
            amax = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }

    block_q3_K y{};
    if (max_scale != 0.0f) {
        const float iscale = -32.f / max_scale;
        uint8_t biased[16];
        for (int j = 0; j < QK_K / 16; ++j) {
            const int8_t l = low_byte(nearest_int(iscale * scales[j]));
            biased[j] = static_cast<uint8_t>(clamp_level(l, -32, 31) + 32);
        }
        const auto packed = pack_q3_k_scales(biased);
        std::memcpy(y.scales, packed.data(), packed.size());
        y.d = f32_to_f16(1 / iscale);
    } else {
        y.d = f32_to_f16(0.f);
    }

    const float d_all = f16_to_f32(y.d);
    const auto stored = unpack_q3_k_scales(y.scales);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * static_cast<float>(stored[j]);
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; ++l) {
            const int q = clamp_level(nearest_int(x[16 * j + l] / d), -4, 3);
            levels[16 * j + l] = static_cast<int8_t>(q + 4);
        }
    }

    // Levels 0..7: bit 2 goes to hmask (value j sets bit j / 32 of hmask[j % 32]), bits 0-1 to qs.
    uint8_t low_bits[QK_K];
    for (int j = 0; j < QK_K; ++j) {
        int level = levels[j];
        if (level > 3) {
            y.hmask[j % 32] = static_cast<uint8_t>(y.hmask[j % 32] | (1u << (j / 32)));
            level -= 4;
        }
        low_bits[j] = static_cast<uint8_t>(level);
    }
    pack_2bit(low_bits, y.qs);
    return y;
}

namespace {

// Q4_K and Q5_K share everything but the number of levels and the search parameters.
struct FourFiveBitLevels {
    float d;
    float dmin;
    std::array<uint8_t, K_SCALE_SIZE> scales;
    uint8_t levels[QK_K];
};

FourFiveBitLevels quantize_levels_q45_K(const float* x, int nmax, float rmin, int nstep) {
    FourFiveBitLevels r{};
    uint8_t scratch[32];
    float weights[32];
    float scales[QK_K / 32];
    float mins[QK_K / 32];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        const float* xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
        scales[j] = search_scale_and_min(32, nmax, xs, weights, r.levels + 32 * j, &mins[j],
                                         scratch, rmin, 0.1f, nstep, false);
        max_scale = std::max(max_scale, scales[j]);
        max_min = std::max(max_min, mins[j]);
    }

    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8];
    uint8_t lm[8];
    for (int j = 0; j < QK_K / 32; ++j) {
        ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
        lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    }
    r.scales = pack_scale_min_k4(ls, lm);
    const uint16_t d_bits = f32_to_f16(max_scale / 63.f);
    const uint16_t dmin_bits = f32_to_f16(max_min / 63.f);
    r.d = f16_to_f32(d_bits);
    r.dmin = f16_to_f32(dmin_bits);

    for (int j = 0; j < QK_K / 32; ++j) {
        const ScaleMin sm = unpack_scale_min_k4(j, r.scales.data());
        const float d = r.d * static_cast<float>(sm.scale);
        if (d == 0.0f) continue;
        const float dm = r.dmin * static_cast<float>(sm.min);
        for (int l = 0; l < 32; ++l) {
            r.levels[32 * j + l] =
                static_cast<uint8_t>(clamp_level(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
        }
    }
    return r;
}

}  // namespace

block_q4_K quantize_block_q4_K(const float* x) {
    const FourFiveBitLevels q = quantize_levels_q45_K(x, 15, -1.f, 20);
    block_q4_K y{};
    y.d = f32_to_f16(q.d);
    y.dmin = f32_to_f16(q.dmin);
    std::memcpy(y.scales, q.scales.data(), K_SCALE_SIZE);
    // Chunk c of 64 values: low nibbles of qs[32c + l] are value 64c + l, high nibbles + 32.
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            y.qs[32 * c + l] =
                static_cast<uint8_t>(q.levels[64 * c + l] | (q.levels[64 * c + l + 32] << 4));
        }
    }
    return y;
}

block_q5_K quantize_block_q5_K(const float* x) {
    const FourFiveBitLevels q = quantize_levels_q45_K(x, 31, -0.5f, 15);
    block_q5_K y{};
    y.d = f32_to_f16(q.d);
    y.dmin = f32_to_f16(q.dmin);
    std::memcpy(y.scales, q.scales.data(), K_SCALE_SIZE);
    // As Q4_K for the low 4 bits; the fifth bit of value 64c + l is bit 2c of qh[l], of value
    // 64c + 32 + l bit 2c + 1.
    for (int c = 0; c < 4; ++c) {
        for (int l = 0; l < 32; ++l) {
            const int lo = q.levels[64 * c + l];
            const int hi = q.levels[64 * c + l + 32];
            y.qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
            const int bits = ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1));
            y.qh[l] = static_cast<uint8_t>(y.qh[l] | bits);
        }
    }
    return y;
}

block_q6_K quantize_block_q6_K(const float* x) {
    int8_t levels[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
        scales[j] = search_symmetric_scale(16, 32, x + 16 * j, levels + 16 * j);
        if (std::fabs(scales[j]) > max_abs_scale) {
            max_abs_scale = std::fabs(scales[j]);
            max_scale = scales[j];
        }
    }
    block_q6_K y{};
    if (max_abs_scale < kGroupMaxEps) return y;  // all zero, d = +0

    const float iscale = -128.f / max_scale;
    y.d = f32_to_f16(1 / iscale);
    for (int j = 0; j < QK_K / 16; ++j) {
        y.scales[j] = low_byte(std::min(127, nearest_int(iscale * scales[j])));
    }
    const float d_all = f16_to_f32(y.d);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = d_all * static_cast<float>(y.scales[j]);
        if (d == 0.0f) continue;
        for (int l = 0; l < 16; ++l) {
            const int q = clamp_level(nearest_int(x[16 * j + l] / d), -32, 31);
            levels[16 * j + l] = static_cast<int8_t>(q + 32);
        }
    }
    // Half h: value 128h + l + 32k (k = 0..3) puts its low nibble in ql[64h + l + 32 (k % 2)]
    // (low nibble for k < 2) and its top 2 bits at bits 2k of qh[32h + l].
    for (int h = 0; h < 2; ++h) {
        const int8_t* lv = levels + 128 * h;
        for (int l = 0; l < 32; ++l) {
            y.ql[64 * h + l] = static_cast<uint8_t>((lv[l] & 0xF) | ((lv[l + 64] & 0xF) << 4));
            y.ql[64 * h + l + 32] =
                static_cast<uint8_t>((lv[l + 32] & 0xF) | ((lv[l + 96] & 0xF) << 4));
            y.qh[32 * h + l] =
                static_cast<uint8_t>((lv[l] >> 4) | ((lv[l + 32] >> 4) << 2) |
                                     ((lv[l + 64] >> 4) << 4) | ((lv[l + 96] >> 4) << 6));
        }
    }
    return y;
}

block_q8_K quantize_block_q8_K(const float* x) {
    float max = 0;
    float amax = 0;
    for (int j = 0; j < QK_K; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    block_q8_K y{};
    if (amax == 0.0f) return y;
    // -127 rather than -128 keeps every quant in -127..127 (ggml: needed by its IQ2 kernels).
    const float iscale = -127.f / max;
    for (int j = 0; j < QK_K; ++j) y.qs[j] = low_byte(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < QK_K / 16; ++j) {
        int sum = 0;
        for (int l = 0; l < 16; ++l) sum += y.qs[16 * j + l];
        y.bsums[j] = static_cast<int16_t>(sum);
    }
    y.d = 1 / iscale;
    return y;
}

}  // namespace minfer::quant_detail
