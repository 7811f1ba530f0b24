#pragma once
// The quantized block layouts exactly as ggml stores them (ggml-common.h): C-compatible structs
// whose sizes are asserted against the GGUF type table. Halves are stored as raw uint16_t bits
// (see core/half.h). A row of n values of a type is n / QK blocks laid end to end.

#include <cstddef>
#include <cstdint>

namespace minfer {

inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
inline constexpr int QK8_1 = 32;
inline constexpr int QK4_NL = 32;
inline constexpr int QK_K = 256;  // super-block size of the K-quants
inline constexpr int K_SCALE_SIZE = 12;

using f16_bits = uint16_t;

// value = d * (q - 8), q a nibble; qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct block_q4_0 {
    f16_bits d;
    uint8_t qs[QK4_0 / 2];
};
// value = d * q + m
struct block_q4_1 {
    f16_bits d;
    f16_bits m;
    uint8_t qs[QK4_1 / 2];
};
// value = d * (q - 16), q = nibble | (bit j of qh) << 4
struct block_q5_0 {
    f16_bits d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
};
struct block_q5_1 {
    f16_bits d;
    f16_bits m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
};
// value = d * q
struct block_q8_0 {
    f16_bits d;
    int8_t qs[QK8_0];
};
// s = d * sum(qs), used as the activation format of Q4_1 / Q5_1 in ggml
struct block_q8_1 {
    f16_bits d;
    f16_bits s;
    int8_t qs[QK8_1];
};

// 2.625 bits per weight: 16 sub-blocks of 16, 4-bit scales and mins.
struct block_q2_K {
    uint8_t scales[QK_K / 16];  // low nibble scale, high nibble min
    uint8_t qs[QK_K / 4];       // 2-bit quants
    f16_bits d;                 // super-block scale for the scales
    f16_bits dmin;              // super-block scale for the mins
};
// 3.4375 bits per weight: 16 sub-blocks of 16, 6-bit scales.
struct block_q3_K {
    uint8_t hmask[QK_K / 8];  // high bit of each quant
    uint8_t qs[QK_K / 4];     // low 2 bits
    uint8_t scales[12];       // 16 scales of 6 bits
    f16_bits d;
};
// 4.5 bits per weight: 8 sub-blocks of 32, 6-bit scales and mins packed in 12 bytes.
struct block_q4_K {
    f16_bits d;
    f16_bits dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
};
// 5.5 bits per weight.
struct block_q5_K {
    f16_bits d;
    f16_bits dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
};
// 6.5625 bits per weight: 16 sub-blocks of 16, 8-bit scales.
struct block_q6_K {
    uint8_t ql[QK_K / 2];  // low 4 bits
    uint8_t qh[QK_K / 4];  // high 2 bits
    int8_t scales[QK_K / 16];
    f16_bits d;
};
// The activation format of the K-quants: f32 scale, 8-bit quants, sums of each 16 quants.
struct block_q8_K {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
};
// Non-linear 4-bit: value = d * kvalues_iq4nl[nibble].
struct block_iq4_nl {
    f16_bits d;
    uint8_t qs[QK4_NL / 2];
};
struct block_iq4_xs {
    f16_bits d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
};
// Ternary: 1.6875 bits per weight (5 trits per byte in qs, 4 per byte in qh).
struct block_tq1_0 {
    uint8_t qs[(QK_K - 4 * QK_K / 64) / 5];
    uint8_t qh[QK_K / 64];
    f16_bits d;
};
// Ternary in 2 bits.
struct block_tq2_0 {
    uint8_t qs[QK_K / 4];
    f16_bits d;
};

static_assert(sizeof(block_q4_0) == 18);
static_assert(sizeof(block_q4_1) == 20);
static_assert(sizeof(block_q5_0) == 22);
static_assert(sizeof(block_q5_1) == 24);
static_assert(sizeof(block_q8_0) == 34);
static_assert(sizeof(block_q8_1) == 36);
static_assert(sizeof(block_q2_K) == 84);
static_assert(sizeof(block_q3_K) == 110);
static_assert(sizeof(block_q4_K) == 144);
static_assert(sizeof(block_q5_K) == 176);
static_assert(sizeof(block_q6_K) == 210);
static_assert(sizeof(block_q8_K) == 292);
static_assert(sizeof(block_iq4_nl) == 18);
static_assert(sizeof(block_iq4_xs) == 136);
static_assert(sizeof(block_tq1_0) == 54);
static_assert(sizeof(block_tq2_0) == 66);

// The 16 non-linear levels of IQ4_NL and IQ4_XS.
inline constexpr int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                             1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace minfer
