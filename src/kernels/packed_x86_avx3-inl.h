// AVX-512 decoding of the interleaved layout (packed_layout.h): one block of 16 rows into the
// codes that vpdpbusd multiplies, one vector per group of 4 columns (row r in 32-bit lane r), and
// the block's scales, without any transposition: each vector is one aligned load.
//
// Each type is a traits struct:
//   kBlockValues, kSub (values per sub-block), kSubs, kMin (a min term: Q4_1, Q5_1, Q4_K, Q5_K),
//     kOffset (the codes are value + kOffset, unsigned);
//   Head Decode(const uint8_t* a, const uint8_t* b): the block's scales for the 16 rows: d (f32),
//     min_scale (with kMin: Q4_1's and Q5_1's m, the K-quants' -dmin), the integer sub-block
//     scales and the mins in int16 pairs (low half: the even sub-block), as the GEMM panels hold
//     them (matmul_internal.h);
//   ForEachSub(a, head, f): calls f(s, v) for every sub-block s, v[kSub / 4] its codes.
// `a` is the block's codes, `b` its 16 rows' d in a d unit (never read where the type has none).
// Per-target code: included by packed_simd.cpp once per Highway target; AVX-512 only.

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_PACKED_X86_AVX3_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_PACKED_X86_AVX3_INL_H_
#undef MINFER_KERNELS_PACKED_X86_AVX3_INL_H_
#else
#define MINFER_KERNELS_PACKED_X86_AVX3_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "quant/block_types.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3

namespace packed {

// Word w of a block's codes: the 16 rows' copies of that 32-bit word.
HWY_INLINE __m512i Word(const uint8_t* a, int w) {
    return _mm512_load_si512(a + 64 * w);
}

// A d unit's half: the 16 rows' f16 d, as f32.
HWY_INLINE __m512 DUnitScales(const uint8_t* b) {
    return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(b)));
}

HWY_INLINE __m512i Low4(__m512i v) {
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}
HWY_INLINE __m512i High4(__m512i v) {
    return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F));
}

// f16 in the low (high = false) or high half of each word, as f32.
HWY_INLINE __m512 HalfToFloat(__m512i words, bool high) {
    if (high) words = _mm512_srli_epi32(words, 16);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// The IQ4_NL table as value + 128 (unsigned codes), in every 128-bit lane for vpshufb.
HWY_INLINE __m512i Iq4Table() {
    alignas(16) uint8_t biased[16];
    for (int i = 0; i < 16; ++i) biased[i] = static_cast<uint8_t>(kvalues_iq4nl[i] + 128);
    return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(biased)));
}

// Scales of a 32-value block: d only.
struct Block32Head {
    __m512 d;
};

// ---- 32-value blocks: one sub-block, codes of the 8 groups ----

struct Q4_0 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 8;
    static constexpr bool kMin = false;
    using Head = Block32Head;
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b) { return {DUnitScales(b)}; }
    // Word j: columns 4j .. 4j + 3 in its low nibbles, 16 + 4j .. in its high ones.
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        __m512i v[8];
        for (int j = 0; j < 4; ++j) {
            const __m512i w = Word(a, j);
            v[j] = Low4(w);
            v[4 + j] = High4(w);
        }
        f(0, v);
    }
};

struct Iq4Nl {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 128;
    static constexpr bool kMin = false;
    using Head = Block32Head;
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b) { return {DUnitScales(b)}; }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        const __m512i table = Iq4Table();
        __m512i v[8];
        for (int j = 0; j < 4; ++j) {
            const __m512i w = Word(a, j);
            v[j] = _mm512_shuffle_epi8(table, Low4(w));
            v[4 + j] = _mm512_shuffle_epi8(table, High4(w));
        }
        f(0, v);
    }
};

// Codes v (nibbles) plus 16 in the bytes whose bit g of the bit plane (packed_layout.h) is set:
// the fifth bits of column group g.
HWY_INLINE __m512i WithFifthBit(__m512i v, __m512i plane, int g) {
    const __mmask64 set =
        _mm512_test_epi8_mask(plane, _mm512_set1_epi8(static_cast<char>(1 << g)));
    return _mm512_mask_add_epi8(v, set, v, _mm512_set1_epi8(0x10));
}

// Q5_0: words 0-3 the nibbles as Q4_0's, unit 4 the fifth bits (bit g: column group g).
struct Q5_0 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 16;
    static constexpr bool kMin = false;
    using Head = Block32Head;
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b) { return {DUnitScales(b)}; }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        const __m512i plane = Word(a, 4);
        __m512i v[8];
        for (int j = 0; j < 4; ++j) {
            const __m512i w = Word(a, j);
            v[j] = WithFifthBit(Low4(w), plane, j);
            v[4 + j] = WithFifthBit(High4(w), plane, 4 + j);
        }
        f(0, v);
    }
};

// Q4_1 and Q5_1: word 0 d | m (as the file's block starts), then Q4_0's or Q5_0's units.
struct Block32MinHead {
    __m512 d, min_scale;
};
HWY_INLINE Block32MinHead DecodeDM(const uint8_t* a) {
    const __m512i dm = Word(a, 0);
    return {HalfToFloat(dm, false), HalfToFloat(dm, true)};
}

// Q4_1: the codes are the nibbles themselves (value = d * code + m).
struct Q4_1 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 0;
    static constexpr bool kMin = true;
    using Head = Block32MinHead;
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*) { return DecodeDM(a); }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        Q4_0::ForEachSub(a + 64, Block32Head{}, f);
    }
};

struct Q5_1 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 0;
    static constexpr bool kMin = true;
    using Head = Block32MinHead;
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*) { return DecodeDM(a); }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        Q5_0::ForEachSub(a + 64, Block32Head{}, f);
    }
};

// Q8_0: words 0-7 are the codes already (value + 128, stored so at load).
struct Q8_0 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1, kOffset = 128;
    static constexpr bool kMin = false;
    using Head = Block32Head;
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b) { return {DUnitScales(b)}; }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        __m512i v[8];
        for (int j = 0; j < 8; ++j) v[j] = Word(a, j);
        f(0, v);
    }
};

// ---- 256-value blocks ----

// Q4_K and Q5_K share the header: word 0 d | dmin, words 1-3 the 12 bytes of 6-bit scales and
// mins (see quant/k_scales.h).
struct KHead {
    __m512 d, min_scale;
    __m512i scale[8], mins[4];
};
// pshufb indices, the same in every 128-bit lane (4 rows' words): byte k of each word into the
// low byte of its 32-bit lane (the rest zero), and bytes k, k + 1 into the low bytes of its two
// 16-bit halves.
HWY_INLINE __m512i ByteToLane(int k) {
    const int z = 0x80;  // pshufb writes zero
    return _mm512_broadcast_i32x4(
        _mm_setr_epi8(k, z, z, z, 4 + k, z, z, z, 8 + k, z, z, z, 12 + k, z, z, z));
}
HWY_INLINE __m512i BytePairToHalves(int k) {
    const int z = 0x80;
    return _mm512_broadcast_i32x4(_mm_setr_epi8(k, z, k + 1, z, 4 + k, z, 5 + k, z, 8 + k, z, 9 + k,
                                                z, 12 + k, z, 13 + k, z));
}

// The 6-bit scales and mins of 16 rows at once, byte by byte (each row's 12 bytes are in the
// words s0, s1, s2; quant/k_scales.h): bytes j of s0 and s1 hold scale j and min j (j < 4) in
// their low 6 bits and the top 2 bits of scale and min j + 4, whose low 4 bits are the low and
// high nibble of byte j of s2. Then one pshufb per vector of 16 lanes (a third of the operations
// of shifting each byte out of each word).
HWY_INLINE KHead DecodeK4Head(const uint8_t* a) {
    const __m512i dm = Word(a, 0), s0 = Word(a, 1), s1 = Word(a, 2), s2 = Word(a, 3);
    KHead h;
    h.d = HalfToFloat(dm, false);
    h.min_scale = _mm512_sub_ps(_mm512_setzero_ps(), HalfToFloat(dm, true));
    const __m512i low6 = _mm512_set1_epi8(0x3F), low4 = _mm512_set1_epi8(0x0F);
    const __m512i bits45 = _mm512_set1_epi8(0x30);
    constexpr int kAndOr = 0xEA;  // vpternlogd: (first & second) | third
    // Top 2 bits of each byte of s0 and s1 to bits 4-5 (16-bit shifts: the masks drop what
    // crosses from the next byte).
    const __m512i scale_top = _mm512_and_si512(_mm512_srli_epi16(s0, 2), bits45);
    const __m512i min_top = _mm512_and_si512(_mm512_srli_epi16(s1, 2), bits45);
    const __m512i scale03 = _mm512_and_si512(s0, low6), min03 = _mm512_and_si512(s1, low6);
    const __m512i scale47 = _mm512_ternarylogic_epi32(s2, low4, scale_top, kAndOr);
    const __m512i min47 =
        _mm512_ternarylogic_epi32(_mm512_srli_epi16(s2, 4), low4, min_top, kAndOr);
    for (int j = 0; j < 4; ++j) {
        h.scale[j] = _mm512_shuffle_epi8(scale03, ByteToLane(j));
        h.scale[j + 4] = _mm512_shuffle_epi8(scale47, ByteToLane(j));
    }
    // mins[j]: min 2j | min 2j + 1 << 16.
    h.mins[0] = _mm512_shuffle_epi8(min03, BytePairToHalves(0));
    h.mins[1] = _mm512_shuffle_epi8(min03, BytePairToHalves(2));
    h.mins[2] = _mm512_shuffle_epi8(min47, BytePairToHalves(0));
    h.mins[3] = _mm512_shuffle_epi8(min47, BytePairToHalves(2));
    return h;
}

// Q4_K: words 4 + 8 pair + j hold group j of sub-block 2 pair (low nibbles) and of 2 pair + 1
// (high nibbles). Codes = values (0-15). One sub-block at a time (the words are loaded twice, from
// L1), so that at most 8 code vectors are live beside the accumulators of 8 tokens.
struct Q4_K {
    static constexpr int kBlockValues = 256, kSub = 32, kSubs = 8, kOffset = 0;
    static constexpr bool kMin = true;
    using Head = KHead;
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*) { return DecodeK4Head(a); }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
            __m512i v[8];
            for (int j = 0; j < 8; ++j) {
                const __m512i w = Word(a, 4 + 8 * (s / 2) + j);
                v[j] = s % 2 == 0 ? Low4(w) : High4(w);
            }
            f(s, v);
        }
    }
};

// Q5_K: as Q4_K, the words of sub-blocks 2q and 2q + 1 at 6 + 10q .. and before them their
// fifth bits, planes 4 + 10q and 5 + 10q (bit j: column group j). Codes = values (0-31).
struct Q5_K {
    static constexpr int kBlockValues = 256, kSub = 32, kSubs = 8, kOffset = 0;
    static constexpr bool kMin = true;
    using Head = KHead;
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*) { return DecodeK4Head(a); }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
            const int pair = 4 + 10 * (s / 2);
            const __m512i plane = Word(a, pair + s % 2);
            __m512i v[8];
            for (int j = 0; j < 8; ++j) {
                const __m512i w = Word(a, pair + 2 + j);
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
        __m512 d;
        __m512i scale[16];
    };
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t* b) {
        Head h;
        h.d = DUnitScales(b);
        for (int k = 0; k < 4; ++k) {  // 4 scales per word
            const __m512i words = Word(a, k);
            for (int i = 0; i < 4; ++i) {
                h.scale[4 * k + i] = _mm512_srai_epi32(_mm512_slli_epi32(words, 24 - 8 * i), 24);
            }
        }
        return h;
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        const __m512i low6 = _mm512_set1_epi8(0x3F);
        const __m512i low2 = _mm512_set1_epi8(0x03), low4 = _mm512_set1_epi8(0x0F);
        // vpternlogd 0xE4: bits of the first operand where the third is set, else the second's.
        constexpr int kSelect = 0xE4;
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) {
            const __m512i u0 = Word(a, 4 + 3 * k), u1 = Word(a, 5 + 3 * k), u2 = Word(a, 6 + 3 * k);
            __m512i v[4];
            v[0] = _mm512_and_si512(u0, low6);
            v[1] = _mm512_and_si512(u1, low6);
            v[2] = _mm512_and_si512(u2, low6);
            // Bits 6-7 of u0, u1, u2 to bits 0-1, 2-3, 4-5 (16-bit shifts: the selections and
            // the last mask drop what crosses from the next byte).
            const __m512i x = _mm512_ternarylogic_epi32(_mm512_srli_epi16(u0, 6),
                                                        _mm512_srli_epi16(u1, 4), low2, kSelect);
            const __m512i y = _mm512_ternarylogic_epi32(x, _mm512_srli_epi16(u2, 2), low4, kSelect);
            v[3] = _mm512_and_si512(y, low6);
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
        __m512 d;
        __m512i scale[8];
    };
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*) {
        const __m512i w0 = Word(a, 0), sl = Word(a, 1);
        Head h;
        h.d = HalfToFloat(w0, false);
        for (int s = 0; s < 8; ++s) {
            const __m512i low =
                _mm512_and_si512(_mm512_srli_epi32(sl, 4 * s), _mm512_set1_epi32(15));
            const __m512i high =
                _mm512_and_si512(_mm512_srli_epi32(w0, 16 + 2 * s), _mm512_set1_epi32(3));
            h.scale[s] = _mm512_sub_epi32(_mm512_or_si512(low, _mm512_slli_epi32(high, 4)),
                                          _mm512_set1_epi32(32));
        }
        return h;
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, F&& f) {
        const __m512i table = Iq4Table();
        for (int s = 0; s < 8; ++s) {
            __m512i v[8];
            for (int k = 0; k < 4; ++k) {
                const __m512i w = Word(a, 2 + 4 * s + k);
                v[k] = _mm512_shuffle_epi8(table, Low4(w));
                v[4 + k] = _mm512_shuffle_epi8(table, High4(w));
            }
            f(s, v);
        }
    }
};

}  // namespace packed

#endif  // HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
