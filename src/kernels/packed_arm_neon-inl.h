// NEON decoding of the interleaved layout (packed_layout.h), a quarter of a group at a time: a
// 64-byte unit holds 16 rows' 4 bytes, and quarter q (bytes 16q .. 16q + 15: rows 4q .. 4q + 3)
// is one NEON register, row 4q + r in 32-bit lane r, the layout of the GEMM panels' groups
// (matmul_internal.h). So the x86 kernels' layout serves aarch64 without one of its own: each unit
// is still read once, front to back.
//
// The traits mirror packed_x86_avx2-inl.h's, per quarter:
//   Head Decode(a, b, q): the block's scales for rows 4q .. 4q + 3 (d as f32; with kMin the
//     panels' min_scale (Q4_1's and Q5_1's m, the K-quants' -dmin) and the K-quants' mins in int16
//     pairs, low half the even sub-block);
//   Scale(head, a, q, s): sub-block s's integer scales (types with sub-blocks);
//   ForEachSub(a, head, q, f): calls f(s, v) for every sub-block s, v[kSub / 4] its codes
//     (value + kOffset, unsigned).
// `a` is the block's codes, `b` its d unit (types with one; never read otherwise). The values are
// those the portable panel filling (gemm_panels.cpp) computes from the file's layout, so the
// panels, and the products, are the same bits.
// Per-target code: included by packed_simd.cpp once per Highway target; aarch64's NEON only.

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_PACKED_ARM_NEON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_PACKED_ARM_NEON_INL_H_
#undef MINFER_KERNELS_PACKED_ARM_NEON_INL_H_
#else
#define MINFER_KERNELS_PACKED_ARM_NEON_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "quant/block_types.h"

// Defined anew for each target (the file is included once per target).
#undef MINFER_PACKED_ARM_NEON
#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#include <arm_neon.h>
#define MINFER_PACKED_ARM_NEON 1
#endif

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#ifdef MINFER_PACKED_ARM_NEON

namespace packed {

// Quarter q of word (unit) w of a block's codes: rows 4q .. 4q + 3's copies of that 32-bit word.
HWY_INLINE uint8x16_t Word(const uint8_t* a, int w, int q) {
    return vld1q_u8(a + 64 * w + 16 * q);
}

// Rows 4q .. 4q + 3 of a d unit: their f16 d, as f32.
HWY_INLINE float32x4_t DUnitScales(const uint8_t* b, int q) {
    return vcvt_f32_f16(vreinterpret_f16_u8(vld1_u8(b + 8 * q)));
}

HWY_INLINE uint8x16_t Low4(uint8x16_t v) {
    return vandq_u8(v, vdupq_n_u8(0x0F));
}
HWY_INLINE uint8x16_t High4(uint8x16_t v) {
    return vshrq_n_u8(v, 4);
}

// f16 in the low (high = false) or high half of each 32-bit lane, as f32.
HWY_INLINE float32x4_t HalfToFloat(uint8x16_t words, bool high) {
    const uint32x4_t w = vreinterpretq_u32_u8(words);
    return vcvt_f32_f16(vreinterpret_f16_u16(high ? vshrn_n_u32(w, 16) : vmovn_u32(w)));
}

// Byte k of each 32-bit lane, as an int32.
HWY_INLINE int32x4_t ByteOf(uint8x16_t words, int k) {
    const uint32x4_t w = vshlq_u32(vreinterpretq_u32_u8(words), vdupq_n_s32(-8 * k));
    return vreinterpretq_s32_u32(vandq_u32(w, vdupq_n_u32(0xFF)));
}

// Codes v (nibbles) with the fifth bits of column group g from the bit plane (packed_layout.h):
// bit g of each byte to bit 4 (NEON shifts bytes on their own: nothing crosses between them).
HWY_INLINE uint8x16_t WithFifthBit(uint8x16_t v, uint8x16_t plane, int g) {
    const uint8x16_t at4 = vshlq_u8(plane, vdupq_n_s8(static_cast<int8_t>(4 - g)));
    return vorrq_u8(v, vandq_u8(at4, vdupq_n_u8(0x10)));
}

// The IQ4_NL table as value + 128, the unsigned codes the panels take, for vqtbl1q.
HWY_INLINE uint8x16_t Iq4BiasedTable() {
    alignas(16) uint8_t entries[16];
    for (int i = 0; i < 16; ++i) entries[i] = static_cast<uint8_t>(kvalues_iq4nl[i] + 128);
    return vld1q_u8(entries);
}

// The 32-value types (one sub-block; the scale d in the d unit).
struct Block32 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1;
    static constexpr bool kMin = false;
    struct Head {
        float32x4_t d;
    };
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b, int q) {
        return {DUnitScales(b, q)};
    }
};

// Q4_0: word j holds columns 4j .. 4j + 3 in its low nibbles, 16 + 4j .. in its high ones.
struct Q4_0 : Block32 {
    static constexpr int kOffset = 8;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        uint8x16_t v[8];
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t w = Word(a, j, q);
            v[j] = Low4(w);
            v[4 + j] = High4(w);
        }
        f(0, v);
    }
};

// IQ4_NL: Q4_0's words, the nibbles indices into the table; codes = table value + 128.
struct Iq4Nl : Block32 {
    static constexpr int kOffset = 128;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        const uint8x16_t table = Iq4BiasedTable();
        uint8x16_t v[8];
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t w = Word(a, j, q);
            v[j] = vqtbl1q_u8(table, Low4(w));
            v[4 + j] = vqtbl1q_u8(table, High4(w));
        }
        f(0, v);
    }
};

// Q5_0: words 0-3 the nibbles as Q4_0's, unit 4 the fifth bits (bit g: column group g).
struct Q5_0 : Block32 {
    static constexpr int kOffset = 16;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        const uint8x16_t plane = Word(a, 4, q);
        uint8x16_t v[8];
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t w = Word(a, j, q);
            v[j] = WithFifthBit(Low4(w), plane, j);
            v[4 + j] = WithFifthBit(High4(w), plane, 4 + j);
        }
        f(0, v);
    }
};

// Q4_1 and Q5_1: word 0 d | m (as the file's block starts), then Q4_0's or Q5_0's units; the
// codes are the values themselves (value = d * code + m).
struct Block32Min {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 0;
    static constexpr bool kMin = true;
    struct Head {
        float32x4_t d, min_scale;
    };
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*, int q) {
        const uint8x16_t dm = Word(a, 0, q);
        return {HalfToFloat(dm, false), HalfToFloat(dm, true)};
    }
};

struct Q4_1 : Block32Min {
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        Q4_0::ForEachSub(a + 64, Q4_0::Head{}, q, f);
    }
};

struct Q5_1 : Block32Min {
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        Q5_0::ForEachSub(a + 64, Q5_0::Head{}, q, f);
    }
};

// Q8_0: words 0-7 are the codes already (value + 128, stored so at load).
struct Q8_0 : Block32 {
    static constexpr int kOffset = 128;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        uint8x16_t v[8];
        for (int j = 0; j < 8; ++j) v[j] = Word(a, j, q);
        f(0, v);
    }
};

// Q4_K and Q5_K: word 0 d | dmin, words 1-3 the 12 bytes of 6-bit scales and mins (byte j of
// words 1, 2, 3: the block's scales[j], [4 + j], [8 + j]; quant/k_scales.h).
struct KHead {
    float32x4_t d, min_scale;
    int32x4_t scale[8], mins[4];  // mins[j]: min 2j | min 2j + 1 << 16
};

HWY_INLINE KHead DecodeK4Head(const uint8_t* a, int q) {
    const uint8x16_t dm = Word(a, 0, q), s0 = Word(a, 1, q), s1 = Word(a, 2, q);
    const uint8x16_t s2 = Word(a, 3, q);
    KHead head;
    head.d = HalfToFloat(dm, false);
    head.min_scale = vnegq_f32(HalfToFloat(dm, true));  // -dmin, as the portable panels
    const uint8x16_t low6 = vdupq_n_u8(0x3F), bits45 = vdupq_n_u8(0x30);
    // Scale and min j < 4 in the low 6 bits of byte j of s0 and s1; j + 4 in the nibbles of s2
    // under the top 2 bits of s0's and s1's byte j (at bits 4-5).
    const uint8x16_t scale03 = vandq_u8(s0, low6), min03 = vandq_u8(s1, low6);
    const uint8x16_t scale47 =
        vorrq_u8(vandq_u8(s2, vdupq_n_u8(0x0F)), vandq_u8(vshrq_n_u8(s0, 2), bits45));
    const uint8x16_t min47 = vorrq_u8(vshrq_n_u8(s2, 4), vandq_u8(vshrq_n_u8(s1, 2), bits45));
    for (int j = 0; j < 4; ++j) {
        head.scale[j] = ByteOf(scale03, j);
        head.scale[j + 4] = ByteOf(scale47, j);
    }
    auto pair = [](uint8x16_t mins, int k) {
        return vorrq_s32(ByteOf(mins, k), vshlq_n_s32(ByteOf(mins, k + 1), 16));
    };
    head.mins[0] = pair(min03, 0);
    head.mins[1] = pair(min03, 2);
    head.mins[2] = pair(min47, 0);
    head.mins[3] = pair(min47, 2);
    return head;
}

struct KQuant {
    static constexpr int kBlockValues = 256, kSub = 32, kSubs = 8, kOffset = 0;
    static constexpr bool kMin = true;
    using Head = KHead;
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*, int q) {
        return DecodeK4Head(a, q);
    }
    static HWY_INLINE int32x4_t Scale(const Head& head, const uint8_t*, int, int s) {
        return head.scale[s];
    }
};

// Q4_K: words 4 + 8 pair + j hold group j of sub-block 2 pair (low nibbles) and of 2 pair + 1
// (high nibbles). Codes = values (0-15).
struct Q4_K : KQuant {
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        for (int s = 0; s < 8; ++s) {
            uint8x16_t v[8];
            for (int j = 0; j < 8; ++j) {
                const uint8x16_t w = Word(a, 4 + 8 * (s / 2) + j, q);
                v[j] = s % 2 == 0 ? Low4(w) : High4(w);
            }
            f(s, v);
        }
    }
};

// Q5_K: as Q4_K, the words of sub-blocks 2p and 2p + 1 at 6 + 10p .. and before them their
// fifth bits, planes 4 + 10p and 5 + 10p (bit j: column group j). Codes = values (0-31).
struct Q5_K : KQuant {
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        for (int s = 0; s < 8; ++s) {
            const int pair = 4 + 10 * (s / 2);
            const uint8x16_t plane = Word(a, pair + s % 2, q);
            uint8x16_t v[8];
            for (int j = 0; j < 8; ++j) {
                const uint8x16_t w = Word(a, pair + 2 + j, q);
                v[j] = WithFifthBit(s % 2 == 0 ? Low4(w) : High4(w), plane, j);
            }
            f(s, v);
        }
    }
};

// Q6_K: words 0-3 the 16 int8 scales, units 4 + 3k .. 4 + 3k + 2 the 6-bit codes of sub-block k
// (16 values, column groups i = 0-3; groups 0-2 in the low 6 bits, group 3's bits 2i, 2i + 1 in
// bits 6-7 of unit i); d in the d unit. Codes = value + 32.
struct Q6_K {
    static constexpr int kBlockValues = 256, kSub = 16, kSubs = 16, kOffset = 32;
    static constexpr bool kMin = false;
    struct Head {
        float32x4_t d;
    };
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b, int q) {
        return {DUnitScales(b, q)};
    }
    static HWY_INLINE int32x4_t Scale(const Head&, const uint8_t* a, int q, int s) {
        const int k = s / 4, i = s % 4;  // 4 scales per word: byte i, sign-extended
        const int32x4_t w = vreinterpretq_s32_u8(Word(a, k, q));
        return vshrq_n_s32(vshlq_s32(w, vdupq_n_s32(24 - 8 * i)), 24);
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        const uint8x16_t low6 = vdupq_n_u8(0x3F);
        for (int k = 0; k < 16; ++k) {
            const uint8x16_t u0 = Word(a, 4 + 3 * k, q), u1 = Word(a, 5 + 3 * k, q);
            const uint8x16_t u2 = Word(a, 6 + 3 * k, q);
            uint8x16_t v[4];
            v[0] = vandq_u8(u0, low6);
            v[1] = vandq_u8(u1, low6);
            v[2] = vandq_u8(u2, low6);
            // Bits 6-7 of u0, u1, u2 to bits 0-1, 2-3, 4-5.
            v[3] = vorrq_u8(vorrq_u8(vshrq_n_u8(u0, 6), vshlq_n_u8(vshrq_n_u8(u1, 6), 2)),
                            vshlq_n_u8(vshrq_n_u8(u2, 6), 4));
            f(k, v);
        }
    }
};

// IQ4_XS: word 0 d | scales_h, word 1 scales_l, words 2 + 4 s + k group k (low nibbles) and
// 4 + k (high) of sub-block s. Scales (low | high << 4) - 32; codes = table value + 128.
struct Iq4Xs {
    static constexpr int kBlockValues = 256, kSub = 32, kSubs = 8, kOffset = 128;
    static constexpr bool kMin = false;
    struct Head {
        float32x4_t d;
        int32x4_t scale[8];
    };
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*, int q) {
        const uint32x4_t w0 = vreinterpretq_u32_u8(Word(a, 0, q));
        const uint32x4_t sl = vreinterpretq_u32_u8(Word(a, 1, q));
        Head head;
        head.d = HalfToFloat(Word(a, 0, q), false);
        for (int s = 0; s < 8; ++s) {
            const uint32x4_t low = vandq_u32(vshlq_u32(sl, vdupq_n_s32(-4 * s)), vdupq_n_u32(15));
            const uint32x4_t high =
                vandq_u32(vshlq_u32(w0, vdupq_n_s32(-(16 + 2 * s))), vdupq_n_u32(3));
            head.scale[s] = vsubq_s32(vreinterpretq_s32_u32(vorrq_u32(low, vshlq_n_u32(high, 4))),
                                      vdupq_n_s32(32));
        }
        return head;
    }
    static HWY_INLINE int32x4_t Scale(const Head& head, const uint8_t*, int, int s) {
        return head.scale[s];
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int q, F&& f) {
        const uint8x16_t table = Iq4BiasedTable();
        for (int s = 0; s < 8; ++s) {
            uint8x16_t v[8];
            for (int k = 0; k < 4; ++k) {
                const uint8x16_t w = Word(a, 2 + 4 * s + k, q);
                v[k] = vqtbl1q_u8(table, Low4(w));
                v[4 + k] = vqtbl1q_u8(table, High4(w));
            }
            f(s, v);
        }
    }
};

}  // namespace packed

#endif  // MINFER_PACKED_ARM_NEON

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
