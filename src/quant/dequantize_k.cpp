// Dequantization of the K-quants (super-blocks of 256 values): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and
// the activation format Q8_K. The bit layouts are described in block_types.h and k_scales.h.

#include "core/half.h"
#include "quant/block_io.h"
#include "quant/dequantize.h"
#include "quant/k_scales.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // bit-exactness with ggml: no fused multiply-add
#endif

namespace minfer {

using quant_detail::load_block;

// Q2_K: each half of 128 values reads 32 bytes of qs; its 4 groups of 32 take bit pairs 0-1,
// 2-3, 4-5, 6-7 of those bytes, and each group is two sub-blocks of 16 (bytes 0-15, 16-31).
void dequantize_row_q2_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_q2_K>(src, i);
        const float d = f16_to_f32(block.d);
        const float dmin = f16_to_f32(block.dmin);
        int sub = 0;  // sub-block index 0..15
        for (int half = 0; half < 2; ++half) {
            const uint8_t* q = block.qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part, ++sub, dst += 16) {
                    const uint8_t sc = block.scales[sub];
                    const float scale = d * static_cast<float>(sc & 0xF);
                    const float min = dmin * static_cast<float>(sc >> 4);
                    for (int l = 0; l < 16; ++l) {
                        const int value = (q[16 * part + l] >> shift) & 3;
                        dst[l] = scale * static_cast<float>(value) - min;
                    }
                }
            }
        }
    }
}

// Q3_K: like Q2_K for the low 2 bits; the third bit of value l of group g (g = 0..7 over the
// super-block) is bit g of hmask[l % 32], and a clear bit subtracts 4.
void dequantize_row_q3_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_q3_K>(src, i);
        const float d = f16_to_f32(block.d);
        const auto scales = unpack_q3_k_scales(block.scales);
        int sub = 0;
        int group = 0;
        for (int half = 0; half < 2; ++half) {
            const uint8_t* q = block.qs + 32 * half;
            for (int shift = 0; shift < 8; shift += 2, ++group) {
                const uint8_t mask = static_cast<uint8_t>(1u << group);
                for (int part = 0; part < 2; ++part, ++sub, dst += 16) {
                    const float scale = d * static_cast<float>(scales[sub]);
                    for (int l = 0; l < 16; ++l) {
                        const int k = 16 * part + l;
                        const int value = ((q[k] >> shift) & 3) - ((block.hmask[k] & mask) ? 0 : 4);
                        dst[l] = scale * static_cast<float>(value);
                    }
                }
            }
        }
    }
}

// Q4_K: 4 chunks of 64 values; chunk c reads qs[32c .. 32c+31], low nibbles are sub-block 2c and
// high nibbles sub-block 2c + 1.
void dequantize_row_q4_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_q4_K>(src, i);
        const float d = f16_to_f32(block.d);
        const float dmin = f16_to_f32(block.dmin);
        for (int chunk = 0; chunk < 4; ++chunk, dst += 64) {
            const uint8_t* q = block.qs + 32 * chunk;
            const ScaleMin lo = unpack_scale_min_k4(2 * chunk, block.scales);
            const ScaleMin hi = unpack_scale_min_k4(2 * chunk + 1, block.scales);
            const float scale_lo = d * static_cast<float>(lo.scale);
            const float min_lo = dmin * static_cast<float>(lo.min);
            const float scale_hi = d * static_cast<float>(hi.scale);
            const float min_hi = dmin * static_cast<float>(hi.min);
            for (int l = 0; l < 32; ++l)
                dst[l] = scale_lo * static_cast<float>(q[l] & 0xF) - min_lo;
            for (int l = 0; l < 32; ++l)
                dst[32 + l] = scale_hi * static_cast<float>(q[l] >> 4) - min_hi;
        }
    }
}

// Q5_K: Q4_K plus a fifth bit: bit 2c of qh[l] for the low half of chunk c, bit 2c + 1 for the
// high half.
void dequantize_row_q5_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_q5_K>(src, i);
        const float d = f16_to_f32(block.d);
        const float dmin = f16_to_f32(block.dmin);
        for (int chunk = 0; chunk < 4; ++chunk, dst += 64) {
            const uint8_t* ql = block.qs + 32 * chunk;
            const uint8_t bit_lo = static_cast<uint8_t>(1u << (2 * chunk));
            const uint8_t bit_hi = static_cast<uint8_t>(2u << (2 * chunk));
            const ScaleMin lo = unpack_scale_min_k4(2 * chunk, block.scales);
            const ScaleMin hi = unpack_scale_min_k4(2 * chunk + 1, block.scales);
            const float scale_lo = d * static_cast<float>(lo.scale);
            const float min_lo = dmin * static_cast<float>(lo.min);
            const float scale_hi = d * static_cast<float>(hi.scale);
            const float min_hi = dmin * static_cast<float>(hi.min);
            for (int l = 0; l < 32; ++l) {
                const int value = (ql[l] & 0xF) + ((block.qh[l] & bit_lo) ? 16 : 0);
                dst[l] = scale_lo * static_cast<float>(value) - min_lo;
            }
            for (int l = 0; l < 32; ++l) {
                const int value = (ql[l] >> 4) + ((block.qh[l] & bit_hi) ? 16 : 0);
                dst[32 + l] = scale_hi * static_cast<float>(value) - min_hi;
            }
        }
    }
}

// Q6_K: each half of 128 values reads 64 bytes of ql, 32 of qh and 8 scales. Value l + 32k
// (k = 0..3) takes the low (k = 0, 1) or high (k = 2, 3) nibble of ql[l + 32 (k % 2)] and bits
// 2k, 2k + 1 of qh[l], minus 32; its scale is scales[l / 16 + 2k].
void dequantize_row_q6_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_q6_K>(src, i);
        const float d = f16_to_f32(block.d);
        for (int half = 0; half < 2; ++half, dst += 128) {
            const uint8_t* ql = block.ql + 64 * half;
            const uint8_t* qh = block.qh + 32 * half;
            const int8_t* sc = block.scales + 8 * half;
            for (int l = 0; l < 32; ++l) {
                const int s = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                // (d * scale) * q, in that order, as ggml evaluates it.
                dst[l] = d * static_cast<float>(sc[s]) * static_cast<float>(q1);
                dst[l + 32] = d * static_cast<float>(sc[s + 2]) * static_cast<float>(q2);
                dst[l + 64] = d * static_cast<float>(sc[s + 4]) * static_cast<float>(q3);
                dst[l + 96] = d * static_cast<float>(sc[s + 6]) * static_cast<float>(q4);
            }
        }
    }
}

void dequantize_row_q8_K(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i, dst += QK_K) {
        const auto block = load_block<block_q8_K>(src, i);
        for (int j = 0; j < QK_K; ++j) dst[j] = block.d * static_cast<float>(block.qs[j]);
    }
}

}  // namespace minfer
