// Dequantization of the 32-value block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0). In each block,
// byte j of qs holds value j in its low nibble and value j + 16 in its high nibble; Q5 types keep
// the fifth bit of value j in bit j of the 32-bit qh.

#include <cstring>

#include "core/half.h"
#include "quant/block_io.h"
#include "quant/dequantize.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // bit-exactness with ggml: no fused multiply-add
#endif

namespace minfer {

using quant_detail::load_block;

void dequantize_row_q4_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK4_0; ++i, dst += QK4_0) {
        const auto block = load_block<block_q4_0>(src, i);
        const float d = f16_to_f32(block.d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            dst[j] = static_cast<float>((block.qs[j] & 0xF) - 8) * d;
            dst[j + QK4_0 / 2] = static_cast<float>((block.qs[j] >> 4) - 8) * d;
        }
    }
}

void dequantize_row_q4_1(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK4_1; ++i, dst += QK4_1) {
        const auto block = load_block<block_q4_1>(src, i);
        const float d = f16_to_f32(block.d);
        const float m = f16_to_f32(block.m);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            dst[j] = static_cast<float>(block.qs[j] & 0xF) * d + m;
            dst[j + QK4_1 / 2] = static_cast<float>(block.qs[j] >> 4) * d + m;
        }
    }
}

namespace {

// The 5-bit values j and j + 16 of a Q5 block (0..31).
struct FiveBitPair {
    int low_half;
    int high_half;
};

inline FiveBitPair five_bit_pair(const uint8_t* qs, uint32_t qh, int j) {
    return {static_cast<int>((qs[j] & 0xF) | (((qh >> j) & 1u) << 4)),
            static_cast<int>((qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4))};
}

inline uint32_t load_qh(const uint8_t (&qh)[4]) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof(bits));
    return bits;
}

}  // namespace

void dequantize_row_q5_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK5_0; ++i, dst += QK5_0) {
        const auto block = load_block<block_q5_0>(src, i);
        const float d = f16_to_f32(block.d);
        const uint32_t qh = load_qh(block.qh);
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const FiveBitPair q = five_bit_pair(block.qs, qh, j);
            dst[j] = static_cast<float>(q.low_half - 16) * d;
            dst[j + QK5_0 / 2] = static_cast<float>(q.high_half - 16) * d;
        }
    }
}

void dequantize_row_q5_1(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK5_1; ++i, dst += QK5_1) {
        const auto block = load_block<block_q5_1>(src, i);
        const float d = f16_to_f32(block.d);
        const float m = f16_to_f32(block.m);
        const uint32_t qh = load_qh(block.qh);
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const FiveBitPair q = five_bit_pair(block.qs, qh, j);
            dst[j] = static_cast<float>(q.low_half) * d + m;
            dst[j + QK5_1 / 2] = static_cast<float>(q.high_half) * d + m;
        }
    }
}

void dequantize_row_q8_0(const void* src, float* dst, int64_t n) {
    for (int64_t i = 0; i < n / QK8_0; ++i, dst += QK8_0) {
        const auto block = load_block<block_q8_0>(src, i);
        const float d = f16_to_f32(block.d);
        for (int j = 0; j < QK8_0; ++j) dst[j] = static_cast<float>(block.qs[j]) * d;
    }
}

}  // namespace minfer
