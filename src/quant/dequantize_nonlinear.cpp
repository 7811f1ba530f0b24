// Dequantization of the non-linear 4-bit types (IQ4_NL, IQ4_XS: a nibble indexes the 16 levels
// of kvalues_iq4nl) and the ternary types (TQ1_0, TQ2_0: values in {-1, 0, 1} times d).

#include "core/half.h"
#include "quant/block_io.h"
#include "quant/dequantize.h"
#include "quant/k_scales.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // bit-exactness with ggml: no fused multiply-add
#endif

namespace minfer {

using quant_detail::load_block;

namespace {

// 32 values from 16 bytes: byte j holds value j (low nibble) and value j + 16 (high nibble).
inline void dequantize_iq4_32(const uint8_t* qs, float scale, float* dst) {
    for (int j = 0; j < 16; ++j) {
        dst[j] = scale * static_cast<float>(kvalues_iq4nl[qs[j] & 0xF]);
        dst[j + 16] = scale * static_cast<float>(kvalues_iq4nl[qs[j] >> 4]);
    }
}

// TQ1_0 packs 5 trits per byte as a base-3 fraction of 256: multiplying the byte by 3^k (mod
// 256) brings trit k to the top, and (q * 3) >> 8 reads it.
inline float ternary_digit(uint8_t packed, int k, float d) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const auto q = static_cast<uint8_t>(packed * kPow3[k]);
    const int trit = (static_cast<uint16_t>(q) * 3) >> 8;
    return static_cast<float>(trit - 1) * d;
}

}  // namespace

void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK4_NL; ++i, dst += QK4_NL) {
        const auto block = load_block<block_iq4_nl>(src, i);
        dequantize_iq4_32(block.qs, f16_to_f32(block.d), dst);
    }
}

void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_iq4_xs>(src, i);
        const float d = f16_to_f32(block.d);
        for (int sub = 0; sub < QK_K / 32; ++sub, dst += 32) {
            const float scale = d * static_cast<float>(unpack_iq4_xs_scale(sub, block));
            dequantize_iq4_32(block.qs + 16 * sub, scale, dst);
        }
    }
}

// TQ1_0 order: qs[0..31] give values 0..159 (trit k of byte m is value 32k + m), qs[32..47] give
// the next 80 (trit k of byte m is 16k + m), and qh[0..3] the last 16 (4 trits each).
void dequantize_row_tq1_0(const void* src, float* dst, int64_t n) {
    constexpr int kQs = sizeof(block_tq1_0::qs);  // 48
    constexpr int kWide = kQs - kQs % 32;         // 32 bytes read in rows of 32
    constexpr int kQh = sizeof(block_tq1_0::qh);  // 4
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_tq1_0>(src, i);
        const float d = f16_to_f32(block.d);
        for (int j = 0; j < kWide; j += 32) {
            for (int k = 0; k < 5; ++k) {
                for (int m = 0; m < 32; ++m) *dst++ = ternary_digit(block.qs[j + m], k, d);
            }
        }
        for (int j = kWide; j < kQs; j += 16) {
            for (int k = 0; k < 5; ++k) {
                for (int m = 0; m < 16; ++m) *dst++ = ternary_digit(block.qs[j + m], k, d);
            }
        }
        for (int k = 0; k < 4; ++k) {
            for (int j = 0; j < kQh; ++j) *dst++ = ternary_digit(block.qh[j], k, d);
        }
    }
}

// TQ2_0: 2 bits per value (0, 1, 2 for -1, 0, 1); byte m of each 32-byte row holds values
// m, m + 32, m + 64, m + 96 in bit pairs 0-1, 2-3, 4-5, 6-7.
void dequantize_row_tq2_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const auto block = load_block<block_tq2_0>(src, i);
        const float d = f16_to_f32(block.d);
        for (int j = 0; j < static_cast<int>(sizeof(block.qs)); j += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int m = 0; m < 32; ++m) {
                    const int q = (block.qs[j + m] >> shift) & 3;
                    *dst++ = static_cast<float>(q - 1) * d;
                }
            }
        }
    }
}

}  // namespace minfer
