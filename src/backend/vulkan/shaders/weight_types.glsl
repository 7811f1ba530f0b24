// The GGUF weight types (quant/block_types.h) as the shaders read them: a type is chosen at build
// time by TYPE_X and gives
//   QK           values per block (1 for the float types)
//   BLOCK_BYTES  bytes per block
//   block_value(block, i)  value i (< QK) of the block starting at byte `block`,
// with ggml's dequantization arithmetic (the CPU's dequantize_row_*), and
//   block_dot(block, xi)   the block's dot product with x[xi .. xi + QK), the matrix products'
//                          inner loop: scales decoded once per block or sub-block, quants read
//                          four to a word. Its sums are in another order than dequantizing first
//                          (a float rounding apart). The includer declares `float x[]`, or
//                          defines VALUES_ONLY to go without it.
// Reads through block_read.glsl.

#include "block_read.glsl"

#if defined(TYPE_F32)
const uint QK = 1u, BLOCK_BYTES = 4u;
float block_value(uint block, uint i) {
    return uintBitsToFloat(weights[block >> 2]);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    return block_value(block, 0u) * x[xi];
}
#endif
#elif defined(TYPE_F16)
const uint QK = 1u, BLOCK_BYTES = 2u;
float block_value(uint block, uint i) {
    return f16_at(block);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    return block_value(block, 0u) * x[xi];
}
#endif
#elif defined(TYPE_BF16)
const uint QK = 1u, BLOCK_BYTES = 2u;
float block_value(uint block, uint i) {
    return uintBitsToFloat((byte_at(block) | (byte_at(block + 1u) << 8)) << 16);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    return block_value(block, 0u) * x[xi];
}
#endif
#elif defined(TYPE_Q4_0)
// d (f16), 16 bytes of nibbles: value i < 16 in the low nibble of byte i, i >= 16 in the high
// nibble of byte i - 16; (q - 8) * d.
const uint QK = 32u, BLOCK_BYTES = 18u;
float block_value(uint block, uint i) {
    const uint q = byte_at(block + 2u + (i & 15u));
    return float(int(i < 16u ? q & 15u : q >> 4) - 8) * f16_at(block);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    float sum = 0.0;
    for (uint w = 0u; w < 4u; ++w) {
        const uint q = u32_at(block + 2u + 4u * w);
        for (uint b = 0u; b < 4u; ++b) {
            const uint byte_ = (q >> (8u * b)) & 0xFFu;
            sum += float(int(byte_ & 15u) - 8) * x[xi + 4u * w + b] +
                   float(int(byte_ >> 4) - 8) * x[xi + 16u + 4u * w + b];
        }
    }
    return f16_at(block) * sum;
}
#endif
#elif defined(TYPE_Q4_1)
// d, m (f16), nibbles as Q4_0: q * d + m.
const uint QK = 32u, BLOCK_BYTES = 20u;
float block_value(uint block, uint i) {
    const uint q = byte_at(block + 4u + (i & 15u));
    return float(i < 16u ? q & 15u : q >> 4) * f16_at(block) + f16_at(block + 2u);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    float sum = 0.0, sum_x = 0.0;
    for (uint w = 0u; w < 4u; ++w) {
        const uint q = u32_at(block + 4u + 4u * w);
        for (uint b = 0u; b < 4u; ++b) {
            const uint byte_ = (q >> (8u * b)) & 0xFFu;
            const float x0 = x[xi + 4u * w + b], x1 = x[xi + 16u + 4u * w + b];
            sum += float(byte_ & 15u) * x0 + float(byte_ >> 4) * x1;
            sum_x += x0 + x1;
        }
    }
    return f16_at(block) * sum + f16_at(block + 2u) * sum_x;
}
#endif
#elif defined(TYPE_Q5_0)
// d (f16), qh (32 fifth bits, bit i for value i), nibbles as Q4_0: (q | bit << 4) - 16, times d.
const uint QK = 32u, BLOCK_BYTES = 22u;
float block_value(uint block, uint i) {
    const uint q = byte_at(block + 6u + (i & 15u));
    const uint high = (byte_at(block + 2u + (i >> 3)) >> (i & 7u)) & 1u;
    return float(int((i < 16u ? q & 15u : q >> 4) | (high << 4)) - 16) * f16_at(block);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    const uint qh = u32_at(block + 2u);
    float sum = 0.0;
    for (uint w = 0u; w < 4u; ++w) {
        const uint q = u32_at(block + 6u + 4u * w);
        for (uint b = 0u; b < 4u; ++b) {
            const uint j = 4u * w + b, byte_ = (q >> (8u * b)) & 0xFFu;
            sum += float(int((byte_ & 15u) | (((qh >> j) & 1u) << 4)) - 16) * x[xi + j] +
                   float(int((byte_ >> 4) | (((qh >> (j + 16u)) & 1u) << 4)) - 16) * x[xi + 16u + j];
        }
    }
    return f16_at(block) * sum;
}
#endif
#elif defined(TYPE_Q5_1)
// d, m (f16), qh, nibbles: (q | bit << 4) * d + m.
const uint QK = 32u, BLOCK_BYTES = 24u;
float block_value(uint block, uint i) {
    const uint q = byte_at(block + 8u + (i & 15u));
    const uint high = (byte_at(block + 4u + (i >> 3)) >> (i & 7u)) & 1u;
    return float((i < 16u ? q & 15u : q >> 4) | (high << 4)) * f16_at(block) + f16_at(block + 2u);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    const uint qh = u32_at(block + 4u);
    float sum = 0.0, sum_x = 0.0;
    for (uint w = 0u; w < 4u; ++w) {
        const uint q = u32_at(block + 8u + 4u * w);
        for (uint b = 0u; b < 4u; ++b) {
            const uint j = 4u * w + b, byte_ = (q >> (8u * b)) & 0xFFu;
            const float x0 = x[xi + j], x1 = x[xi + 16u + j];
            sum += float((byte_ & 15u) | (((qh >> j) & 1u) << 4)) * x0 +
                   float((byte_ >> 4) | (((qh >> (j + 16u)) & 1u) << 4)) * x1;
            sum_x += x0 + x1;
        }
    }
    return f16_at(block) * sum + f16_at(block + 2u) * sum_x;
}
#endif
#elif defined(TYPE_Q8_0)
// d (f16), 32 signed bytes: q * d.
const uint QK = 32u, BLOCK_BYTES = 34u;
float block_value(uint block, uint i) {
    return float(i8_at(block + 2u + i)) * f16_at(block);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    float sum = 0.0;
    for (uint w = 0u; w < 8u; ++w) {
        const uint q = u32_at(block + 2u + 4u * w);
        for (uint b = 0u; b < 4u; ++b)
            sum += float(bitfieldExtract(int(q), int(8u * b), 8)) * x[xi + 4u * w + b];
    }
    return f16_at(block) * sum;
}
#endif
#elif defined(TYPE_Q4_K)
// d, dmin (f16), 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, 128 bytes of nibbles:
// each 64 values share 32 bytes (low nibbles the first 32, high the next). d*sc*q - dmin*m.
const uint QK = 256u, BLOCK_BYTES = 144u;
// The 6-bit scale and min of sub-block j (ggml's get_scale_min_k4).
uvec2 k4_scale_min(uint block, uint j) {
    const uint s = block + 4u;
    if (j < 4u) return uvec2(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
    return uvec2((byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6) << 4),
                 (byte_at(s + j + 4u) >> 4) | ((byte_at(s + j) >> 6) << 4));
}
float block_value(uint block, uint i) {
    const uvec2 sm = k4_scale_min(block, i >> 5);
    const uint q = byte_at(block + 16u + 32u * (i >> 6) + (i & 31u));
    const uint nibble = (i & 32u) == 0u ? q & 15u : q >> 4;
    return f16_at(block) * float(sm.x) * float(nibble) - f16_at(block + 2u) * float(sm.y);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    const float d = f16_at(block), dmin = f16_at(block + 2u);
    float total = 0.0;
    for (uint j = 0u; j < 8u; ++j) {
        const uvec2 sm = k4_scale_min(block, j);
        const uint shift = (j & 1u) * 4u;
        const uint qs = block + 16u + 32u * (j >> 1);
        float sum = 0.0, sum_x = 0.0;
        for (uint w = 0u; w < 8u; ++w) {
            const uint q = (u32_at(qs + 4u * w) >> shift) & 0x0F0F0F0Fu;
            for (uint b = 0u; b < 4u; ++b) {
                const float v = x[xi + 32u * j + 4u * w + b];
                sum += float((q >> (8u * b)) & 15u) * v;
                sum_x += v;
            }
        }
        total += d * float(sm.x) * sum - dmin * float(sm.y) * sum_x;
    }
    return total;
}
#endif
#elif defined(TYPE_Q6_K)
// 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 signed scales, d (f16) last. In each half
// of 128 values, value 32g + l (g < 4, l < 32) takes the low or high nibble of ql[l] (g = 0, 2)
// or ql[l + 32] (g = 1, 3) and bits 2g, 2g+1 of qh[l]; scale l / 16 + 2g of the half's eight.
const uint QK = 256u, BLOCK_BYTES = 210u;
float block_value(uint block, uint i) {
    const uint half_ = i >> 7, r = i & 127u, g = r >> 5, l = r & 31u;
    const uint ql = byte_at(block + 64u * half_ + l + ((g & 1u) != 0u ? 32u : 0u));
    const uint low = g < 2u ? ql & 15u : ql >> 4;
    const uint high = (byte_at(block + 128u + 32u * half_ + l) >> (2u * g)) & 3u;
    const int q = int(low | (high << 4)) - 32;
    const int scale = i8_at(block + 192u + 8u * half_ + (l >> 4) + 2u * g);
    return f16_at(block + 208u) * float(scale) * float(q);
}
#ifndef VALUES_ONLY
float block_dot(uint block, uint xi) {
    const float d = f16_at(block + 208u);
    float total = 0.0;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        for (uint g = 0u; g < 4u; ++g) {
            const uint ql = block + 64u * half_ + ((g & 1u) != 0u ? 32u : 0u);
            const uint qh = block + 128u + 32u * half_;
            const uint low_shift = g < 2u ? 0u : 4u;
            for (uint sixteen = 0u; sixteen < 2u; ++sixteen) {
                float sum = 0.0;
                for (uint w = 0u; w < 4u; ++w) {
                    const uint l = 16u * sixteen + 4u * w;
                    const uint low = (u32_at(ql + l) >> low_shift) & 0x0F0F0F0Fu;
                    const uint high = (u32_at(qh + l) >> (2u * g)) & 0x03030303u;
                    const uint q = low | (high << 4);
                    for (uint b = 0u; b < 4u; ++b)
                        sum += float(int((q >> (8u * b)) & 63u) - 32) *
                               x[xi + 128u * half_ + 32u * g + l + b];
                }
                total += d * float(i8_at(block + 192u + 8u * half_ + sixteen + 2u * g)) * sum;
            }
        }
    }
    return total;
}
#endif
#elif defined(TYPE_Q5_K)
// As Q4_K (scales and mins at +4), with 32 bytes of fifth bits at +16 (bit j of byte l for value
// 32j + l) and the nibbles at +48.
const uint QK = 256u, BLOCK_BYTES = 176u;
#define GENERIC_BLOCK_DOT
uvec2 k4_scale_min(uint block, uint j) {
    const uint s = block + 4u;
    if (j < 4u) return uvec2(byte_at(s + j) & 63u, byte_at(s + j + 4u) & 63u);
    return uvec2((byte_at(s + j + 4u) & 15u) | ((byte_at(s + j - 4u) >> 6) << 4),
                 (byte_at(s + j + 4u) >> 4) | ((byte_at(s + j) >> 6) << 4));
}
float block_value(uint block, uint i) {
    const uint j = i >> 5, l = i & 31u;
    const uvec2 sm = k4_scale_min(block, j);
    const uint q = byte_at(block + 48u + 32u * (i >> 6) + l);
    const uint nibble = (i & 32u) == 0u ? q & 15u : q >> 4;
    const uint high = (byte_at(block + 16u + l) >> j) & 1u;
    return f16_at(block) * float(sm.x) * float(nibble + 16u * high) -
           f16_at(block + 2u) * float(sm.y);
}
#elif defined(TYPE_Q2_K)
// 16 bytes of 4-bit scales (low) and mins (high), 64 bytes of 2-bit quants, d, dmin (f16) at +80.
// In each half of 128 values, value 32j + l takes bits 2j of byte 32 * half + l and the scale
// byte 8 * half + 2j + (l >= 16).
const uint QK = 256u, BLOCK_BYTES = 84u;
#define GENERIC_BLOCK_DOT
float block_value(uint block, uint i) {
    const uint half_ = i >> 7, j = (i & 127u) >> 5, l = i & 31u;
    const uint sc = byte_at(block + 8u * half_ + 2u * j + (l >> 4));
    const uint q = (byte_at(block + 16u + 32u * half_ + l) >> (2u * j)) & 3u;
    return f16_at(block + 80u) * float(sc & 15u) * float(q) - f16_at(block + 82u) * float(sc >> 4);
}
#elif defined(TYPE_Q3_K)
// 32 bytes of high-bit masks, 64 of 2-bit quants, 12 of 6-bit scales (low nibbles in bytes 0-7,
// two high bits each in bytes 8-11), d (f16) at +108. Value 32j + l of half h: quant bits 2j of
// byte 32h + l, minus 4 unless bit 4h + j of mask byte l; scale 8h + 2j + (l >= 16), minus 32.
const uint QK = 256u, BLOCK_BYTES = 110u;
#define GENERIC_BLOCK_DOT
float block_value(uint block, uint i) {
    const uint half_ = i >> 7, j = (i & 127u) >> 5, l = i & 31u;
    const uint s = 8u * half_ + 2u * j + (l >> 4);
    const uint low = s < 8u ? byte_at(block + 96u + s) & 15u : byte_at(block + 96u + s - 8u) >> 4;
    const uint high = (byte_at(block + 104u + (s & 3u)) >> (2u * (s >> 2))) & 3u;
    const int scale = int(low | (high << 4)) - 32;
    const int q = int((byte_at(block + 32u + 32u * half_ + l) >> (2u * j)) & 3u) -
                  (((byte_at(block + l) >> (4u * half_ + j)) & 1u) != 0u ? 0 : 4);
    return f16_at(block + 108u) * float(scale) * float(q);
}
#elif defined(TYPE_IQ4_NL) || defined(TYPE_IQ4_XS)
// The 16 non-linear levels of IQ4 (ggml's kvalues_iq4nl).
const int IQ4_LEVELS[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69,
                                   89, 113);
#define GENERIC_BLOCK_DOT
#if defined(TYPE_IQ4_NL)
// d (f16), nibbles as Q4_0: d * level[q].
const uint QK = 32u, BLOCK_BYTES = 18u;
float block_value(uint block, uint i) {
    const uint q = byte_at(block + 2u + (i & 15u));
    return f16_at(block) * float(IQ4_LEVELS[i < 16u ? q & 15u : q >> 4]);
}
#else
// d (f16), the high 2 bits of 8 sub-block scales (u16 at +2), their low 4 bits (4 bytes at +4),
// then 16 bytes of nibbles a sub-block of 32 (as Q4_0): d * (scale - 32) * level[q].
const uint QK = 256u, BLOCK_BYTES = 136u;
float block_value(uint block, uint i) {
    const uint ib = i >> 5, k = i & 31u;
    const uint high = ((byte_at(block + 2u) | (byte_at(block + 3u) << 8)) >> (2u * ib)) & 3u;
    const uint low = (byte_at(block + 4u + (ib >> 1)) >> (4u * (ib & 1u))) & 15u;
    const uint q = byte_at(block + 8u + 16u * ib + (k & 15u));
    return f16_at(block) * float(int(low | (high << 4)) - 32) *
           float(IQ4_LEVELS[k < 16u ? q & 15u : q >> 4]);
}
#endif
#elif defined(TYPE_TQ2_0)
// 64 bytes of 2-bit ternary codes, d (f16) at +64: value 32l + m of half j is bits 2l of byte
// 32j + m, minus 1, times d.
const uint QK = 256u, BLOCK_BYTES = 66u;
#define GENERIC_BLOCK_DOT
float block_value(uint block, uint i) {
    const uint j = i >> 7, l = (i & 127u) >> 5, m = i & 31u;
    const int q = int((byte_at(block + 32u * j + m) >> (2u * l)) & 3u) - 1;
    return f16_at(block + 64u) * float(q);
}
#elif defined(TYPE_TQ1_0)
// 48 bytes of five base-3 digits each, 4 bytes of four, d (f16) at +52. Digit n of byte b is
// ((b * 3^n mod 256) * 3) >> 8. Values 0-159: bytes 0-31, digit i / 32; 160-239: bytes 32-47,
// digit (i - 160) / 16; 240-255: bytes 48-51, digit (i - 240) / 4. Value (digit - 1) * d.
const uint QK = 256u, BLOCK_BYTES = 54u;
#define GENERIC_BLOCK_DOT
const uint POW3[5] = uint[5](1u, 3u, 9u, 27u, 81u);
float block_value(uint block, uint i) {
    uint byte_, n;
    if (i < 160u) {
        byte_ = i & 31u;
        n = i >> 5;
    } else if (i < 240u) {
        byte_ = 32u + ((i - 160u) & 15u);
        n = (i - 160u) >> 4;
    } else {
        byte_ = 48u + ((i - 240u) & 3u);
        n = (i - 240u) >> 2;
    }
    const uint q = (byte_at(block + byte_) * POW3[n]) & 255u;
    return f16_at(block + 52u) * float(int((q * 3u) >> 8) - 1);
}
#else
#error "no TYPE_ defined"
#endif

#if defined(GENERIC_BLOCK_DOT) && !defined(VALUES_ONLY)
// The types without a block_dot of their own: value by value (slower, the same arithmetic).
float block_dot(uint block, uint xi) {
    float sum = 0.0;
    for (uint i = 0u; i < QK; ++i) sum += block_value(block, i) * x[xi + i];
    return sum;
}
#endif
