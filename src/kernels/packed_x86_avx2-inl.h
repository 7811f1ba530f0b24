// AVX2 decoding of the interleaved layout (packed_layout.h), half a group at a time: a 64-byte
// unit holds 16 rows' 4 bytes, and half h (bytes 32h .. 32h + 31: rows 8h .. 8h + 7) is one ymm
// register, row 8h + r in 32-bit lane r. So the AVX-512 kernels' layout serves AVX2 CPUs (Zen 3,
// Intel's client cores) without a layout of its own: each unit is still read once, front to back.
//
// The traits mirror packed_x86_avx3-inl.h's, per half:
//   Head Decode(a, b, h): the block's scales for rows 8h .. 8h + 7 (d as f32, min_scale with kMin:
//     Q4_1's and Q5_1's m, the K-quants' -dmin; mins in int16 pairs: low half the even sub-block;
//     what else the type's Scale needs);
//   Scale(head, a, h, s): sub-block s's integer scales (types with sub-blocks; Q6_K reads them
//     from its words, the others from the head);
//   ForEachSub(a, head, h, f): calls f(s, v) for every sub-block s, v[kSub / 4] its codes
//     (value + kOffset, unsigned, at most kMaxCode);
//   ForEachIndexSub(a, head, h, f) (the IQ4 types, kIndexed): as ForEachSub with the table
//     indices (the nibbles) for codes;
//   kBlockBytes: a block's bytes in a chunk, its codes and half a d unit where the type has
//     them (the prefetches' pace: a wrong figure would only slow them).
// `a` is the block's codes, `b` its d unit (types with one; never read otherwise).
// Per-target code: included by packed_simd.cpp once per Highway target; AVX2 only.

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_PACKED_X86_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_PACKED_X86_AVX2_INL_H_
#undef MINFER_KERNELS_PACKED_X86_AVX2_INL_H_
#else
#define MINFER_KERNELS_PACKED_X86_AVX2_INL_H_
#endif

#include <cstdint>
#include <cstdlib>

#include "hwy/highway.h"
#include "quant/block_types.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2

namespace packed {

// Half h of word (unit) w of a block's codes: rows 8h .. 8h + 7's copies of that 32-bit word.
HWY_INLINE __m256i Word(const uint8_t* a, int w, int h) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(a + 64 * w + 32 * h));
}

// Rows 8h .. 8h + 7 of a d unit's half: their f16 d, as f32.
HWY_INLINE __m256 DUnitScales(const uint8_t* b, int h) {
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(b + 16 * h)));
}

HWY_INLINE __m256i Low4(__m256i v) {
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}
HWY_INLINE __m256i High4(__m256i v) {
    return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
}

// The same pshufb pattern in both 128-bit lanes.
HWY_INLINE __m256i Pattern(__m128i lane) {
    return _mm256_broadcastsi128_si256(lane);
}

// f16 in the low (high = false) or high half of each 32-bit lane, as f32.
HWY_INLINE __m256 HalfToFloat(__m256i words, bool high) {
    const int k = high ? 2 : 0, z = 0x80;
    const __m256i gathered =
        _mm256_shuffle_epi8(words, Pattern(_mm_setr_epi8(k, k + 1, 4 + k, 5 + k, 8 + k, 9 + k,
                                                         12 + k, 13 + k, z, z, z, z, z, z, z, z)));
    // Each 128-bit lane's 4 halves are in its low 8 bytes: join them.
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(gathered, 0x08)));
}

// The IQ4_NL table in both 128-bit lanes for vpshufb: as value + 128 (the unsigned codes the
// panels take), as the signed values, or as their magnitudes.
enum class Iq4Form { kBiased, kSigned, kMagnitude };
HWY_INLINE __m256i Iq4Table(Iq4Form form) {
    alignas(16) int8_t entries[16];
    for (int i = 0; i < 16; ++i) {
        const int value = kvalues_iq4nl[i];  // -127 .. 113: |value| fits a signed byte
        entries[i] = static_cast<int8_t>(form == Iq4Form::kBiased      ? value + 128
                                         : form == Iq4Form::kMagnitude ? std::abs(value)
                                                                       : value);
    }
    return Pattern(_mm_load_si128(reinterpret_cast<const __m128i*>(entries)));
}

// True for the types whose codes are indices into the IQ4 table (ForEachIndexSub).
template <class Tr>
constexpr bool IsIndexed() {
    if constexpr (requires { Tr::kIndexed; }) return Tr::kIndexed;
    return false;
}

// The IQ4 types' ForEachSub, from their ForEachIndexSub (which gives the table indices, the codes'
// nibbles): the codes as table value + 128.
template <class Tr, class F>
HWY_INLINE void Iq4ForEachSub(const uint8_t* a, const typename Tr::Head& head, int h, F&& f) {
    const __m256i table = Iq4Table(Iq4Form::kBiased);
    Tr::ForEachIndexSub(a, head, h, [&](int s, const __m256i* index) HWY_ATTR {
        __m256i v[Tr::kSub / 4];
        for (int k = 0; k < Tr::kSub / 4; ++k) v[k] = _mm256_shuffle_epi8(table, index[k]);
        f(s, v);
    });
}

// The 32-value types (one sub-block; the scale d in the d unit).
struct Block32 {
    static constexpr int kBlockValues = 32, kSub = 32, kSubs = 1;
    static constexpr bool kMin = false;
    struct Head {
        __m256 d;
    };
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b, int h) {
        return {DUnitScales(b, h)};
    }
};

// ---- 32-value blocks: one sub-block, codes of the 8 groups ----

struct Q4_0 : Block32 {
    static constexpr int kOffset = 8, kMaxCode = 15, kBlockBytes = 4 * 64 + 32;
    // Word j: columns 4j .. 4j + 3 in its low nibbles, 16 + 4j .. in its high ones.
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
        __m256i v[8];
        for (int j = 0; j < 4; ++j) {
            const __m256i w = Word(a, j, h);
            v[j] = Low4(w);
            v[4 + j] = High4(w);
        }
        f(0, v);
    }
};

// IQ4_NL: Q4_0's words, the nibbles indices into the table.
struct Iq4Nl : Block32 {
    static constexpr int kOffset = 128, kMaxCode = 255, kBlockBytes = 4 * 64 + 32;
    static constexpr bool kIndexed = true;  // has ForEachIndexSub
    template <class F>
    static HWY_INLINE void ForEachIndexSub(const uint8_t* a, const Head&, int h, F&& f) {
        __m256i index[8];
        for (int j = 0; j < 4; ++j) {
            const __m256i w = Word(a, j, h);
            index[j] = Low4(w);
            index[4 + j] = High4(w);
        }
        f(0, index);
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head& head, int h, F&& f) {
        Iq4ForEachSub<Iq4Nl>(a, head, h, f);
    }
};

// Codes v (nibbles, bit 4 clear) with the fifth bits of column group g from half h of the bit
// plane (packed_layout.h): bit g of each byte shifted to bit 4. The 16-bit shifts carry bits
// across bytes, but never to bit 4 of the other byte, and the mask drops them.
HWY_INLINE __m256i WithFifthBit(__m256i v, __m256i plane, int g) {
    const __m256i at4 = g <= 4 ? _mm256_slli_epi16(plane, 4 - g) : _mm256_srli_epi16(plane, g - 4);
    return _mm256_or_si256(v, _mm256_and_si256(at4, _mm256_set1_epi8(0x10)));
}

// Q5_0: words 0-3 the nibbles as Q4_0's, unit 4 the fifth bits (bit g: column group g).
struct Q5_0 : Block32 {
    static constexpr int kOffset = 16, kMaxCode = 31, kBlockBytes = 5 * 64 + 32;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
        const __m256i plane = Word(a, 4, h);
        __m256i v[8];
        for (int j = 0; j < 4; ++j) {
            const __m256i w = Word(a, j, h);
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
        __m256 d, min_scale;
    };
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*, int h) {
        const __m256i dm = Word(a, 0, h);
        return {HalfToFloat(dm, false), HalfToFloat(dm, true)};
    }
};

struct Q4_1 : Block32Min {
    static constexpr int kMaxCode = 15, kBlockBytes = 5 * 64;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
        Q4_0::ForEachSub(a + 64, Q4_0::Head{}, h, f);
    }
};

struct Q5_1 : Block32Min {
    static constexpr int kMaxCode = 31, kBlockBytes = 6 * 64;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
        Q5_0::ForEachSub(a + 64, Q5_0::Head{}, h, f);
    }
};

// Q8_0: words 0-7 are the codes already (value + 128, stored so at load).
struct Q8_0 : Block32 {
    static constexpr int kOffset = 128, kMaxCode = 255, kBlockBytes = 8 * 64 + 32;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
        __m256i v[8];
        for (int j = 0; j < 8; ++j) v[j] = Word(a, j, h);
        f(0, v);
    }
};

// ---- 256-value blocks ----

// Q4_K and Q5_K: word 0 d | dmin, words 1-3 the 12 bytes of 6-bit scales and mins.
struct KHead {
    __m256 d, min_scale;
    __m256i scale[8], mins[4];
    __m256i scale_pairs[8];  // scale[s] in both 16-bit halves of each lane (for vpmaddwd)
};

// pshufb indices, the same in each 128-bit lane (4 rows' words): byte k of each word into the low
// byte of its 32-bit lane (the rest zero), into the low bytes of both its 16-bit halves, and bytes
// k, k + 1 into the low bytes of its two 16-bit halves.
HWY_INLINE __m256i ByteToLane(int k) {
    const int z = 0x80;  // pshufb writes zero
    return Pattern(_mm_setr_epi8(k, z, z, z, 4 + k, z, z, z, 8 + k, z, z, z, 12 + k, z, z, z));
}
HWY_INLINE __m256i ByteToBothHalves(int k) {
    const int z = 0x80;
    return Pattern(
        _mm_setr_epi8(k, z, k, z, 4 + k, z, 4 + k, z, 8 + k, z, 8 + k, z, 12 + k, z, 12 + k, z));
}
HWY_INLINE __m256i BytePairToHalves(int k) {
    const int z = 0x80;
    return Pattern(_mm_setr_epi8(k, z, k + 1, z, 4 + k, z, 5 + k, z, 8 + k, z, 9 + k, z, 12 + k, z,
                                 13 + k, z));
}

// The 6-bit scales of sub-blocks 0-3 (byte j of each word: sub-block j) from word 1 (s0), and
// of sub-blocks 4-7 from words 1 and 3 (s2), as the AVX-512 DecodeK4Head's.
HWY_INLINE __m256i K4Scales03(__m256i s0) {
    return _mm256_and_si256(s0, _mm256_set1_epi8(0x3F));
}
HWY_INLINE __m256i K4Scales47(__m256i s0, __m256i s2) {
    // The top 2 bits of each byte of s0 to bits 4-5 (a 16-bit shift: the mask drops what crosses
    // from the next byte), under the low nibble of s2's.
    return _mm256_or_si256(_mm256_and_si256(s2, _mm256_set1_epi8(0x0F)),
                           _mm256_and_si256(_mm256_srli_epi16(s0, 2), _mm256_set1_epi8(0x30)));
}

// As the AVX-512 DecodeK4Head (quant/k_scales.h): bytes j of s0 and s1 hold scale and min j
// (j < 4) in their low 6 bits and the top 2 bits of scale and min j + 4, whose low 4 bits are the
// nibbles of byte j of s2; then one pshufb per vector.
HWY_INLINE KHead DecodeK4Head(const uint8_t* a, int h) {
    const __m256i dm = Word(a, 0, h), s0 = Word(a, 1, h), s1 = Word(a, 2, h), s2 = Word(a, 3, h);
    KHead head;
    head.d = HalfToFloat(dm, false);
    head.min_scale = _mm256_sub_ps(_mm256_setzero_ps(), HalfToFloat(dm, true));
    const __m256i low6 = _mm256_set1_epi8(0x3F), low4 = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    // The mins as the scales (K4Scales03, K4Scales47), from s1 and the high nibbles of s2.
    const __m256i min_top = _mm256_and_si256(_mm256_srli_epi16(s1, 2), bits45);
    const __m256i scale03 = K4Scales03(s0), min03 = _mm256_and_si256(s1, low6);
    const __m256i scale47 = K4Scales47(s0, s2);
    const __m256i min47 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(s2, 4), low4), min_top);
    for (int j = 0; j < 4; ++j) {
        head.scale[j] = _mm256_shuffle_epi8(scale03, ByteToLane(j));
        head.scale[j + 4] = _mm256_shuffle_epi8(scale47, ByteToLane(j));
        head.scale_pairs[j] = _mm256_shuffle_epi8(scale03, ByteToBothHalves(j));
        head.scale_pairs[j + 4] = _mm256_shuffle_epi8(scale47, ByteToBothHalves(j));
    }
    // mins[j]: min 2j | min 2j + 1 << 16.
    head.mins[0] = _mm256_shuffle_epi8(min03, BytePairToHalves(0));
    head.mins[1] = _mm256_shuffle_epi8(min03, BytePairToHalves(2));
    head.mins[2] = _mm256_shuffle_epi8(min47, BytePairToHalves(0));
    head.mins[3] = _mm256_shuffle_epi8(min47, BytePairToHalves(2));
    return head;
}

// Q4_K and Q5_K: 8 sub-blocks of 32 with their scales and mins in the head.
struct KQuant {
    static constexpr int kBlockValues = 256, kSub = 32, kSubs = 8, kOffset = 0;
    static constexpr bool kMin = true;
    using Head = KHead;
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*, int h) {
        return DecodeK4Head(a, h);
    }
    static HWY_INLINE __m256i Scale(const Head& head, const uint8_t*, int, int s) {
        return head.scale[s];
    }
};

// Q4_K: words 4 + 8 pair + j hold group j of sub-block 2 pair (low nibbles) and of 2 pair + 1
// (high nibbles). Codes = values (0-15).
struct Q4_K : KQuant {
    static constexpr int kMaxCode = 15, kBlockBytes = 36 * 64;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
            __m256i v[8];
            for (int j = 0; j < 8; ++j) {
                const __m256i w = Word(a, 4 + 8 * (s / 2) + j, h);
                v[j] = s % 2 == 0 ? Low4(w) : High4(w);
            }
            f(s, v);
        }
    }
};

// Q5_K: as Q4_K, the words of sub-blocks 2q and 2q + 1 at 6 + 10q .. and before them their
// fifth bits, planes 4 + 10q and 5 + 10q (bit j: column group j). Codes = values (0-31).
struct Q5_K : KQuant {
    static constexpr int kMaxCode = 31, kBlockBytes = 44 * 64;
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
            const int pair = 4 + 10 * (s / 2);
            const __m256i plane = Word(a, pair + s % 2, h);
            __m256i v[8];
            for (int j = 0; j < 8; ++j) {
                const __m256i w = Word(a, pair + 2 + j, h);
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
    static constexpr int kBlockValues = 256, kSub = 16, kSubs = 16, kOffset = 32, kMaxCode = 63;
    static constexpr int kBlockBytes = 52 * 64 + 32;
    static constexpr bool kMin = false;
    struct Head {
        __m256 d;
    };
    static HWY_INLINE Head Decode(const uint8_t*, const uint8_t* b, int h) {
        return {DUnitScales(b, h)};
    }
    // Sub-block s's scale, read from its word as it is needed: the 16 decoded at once did not fit
    // the registers and went through the stack.
    static HWY_INLINE __m256i Scale(const Head&, const uint8_t* a, int h, int s) {
        const int k = s / 4, i = s % 4;  // 4 scales per word
        return _mm256_srai_epi32(_mm256_slli_epi32(Word(a, k, h), 24 - 8 * i), 24);
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head&, int h, F&& f) {
        const __m256i low6 = _mm256_set1_epi8(0x3F), high2 = _mm256_set1_epi8(-0x40);
#pragma GCC unroll 16
        for (int k = 0; k < 16; ++k) {
            const __m256i u0 = Word(a, 4 + 3 * k, h), u1 = Word(a, 5 + 3 * k, h);
            const __m256i u2 = Word(a, 6 + 3 * k, h);
            __m256i v[4];
            v[0] = _mm256_and_si256(u0, low6);
            v[1] = _mm256_and_si256(u1, low6);
            v[2] = _mm256_and_si256(u2, low6);
            // Bits 6-7 of u0, u1, u2 to bits 0-1, 2-3, 4-5: masked before the 16-bit shifts, so
            // nothing crosses from the next byte (8 instructions; selecting after them took 10).
            auto top2 = [high2](__m256i u, int shift) HWY_ATTR {
                return _mm256_srli_epi16(_mm256_and_si256(u, high2), shift);
            };
            v[3] = _mm256_or_si256(_mm256_or_si256(top2(u0, 6), top2(u1, 4)), top2(u2, 2));
            f(k, v);
        }
    }
};

// IQ4_XS: word 0 d | scales_h, word 1 scales_l, words 2 + 4 s + k group k (low nibbles) and
// 4 + k (high) of sub-block s. Scales (low | high << 4) - 32; codes = table value + 128.
struct Iq4Xs {
    static constexpr int kBlockValues = 256, kSub = 32, kSubs = 8, kOffset = 128, kMaxCode = 255;
    static constexpr int kBlockBytes = 34 * 64;
    static constexpr bool kMin = false, kIndexed = true;
    struct Head {
        __m256 d;
        __m256i scale[8];
    };
    static HWY_INLINE Head Decode(const uint8_t* a, const uint8_t*, int h) {
        const __m256i w0 = Word(a, 0, h), sl = Word(a, 1, h);
        Head head;
        head.d = HalfToFloat(w0, false);
        for (int s = 0; s < 8; ++s) {
            const __m256i low =
                _mm256_and_si256(_mm256_srli_epi32(sl, 4 * s), _mm256_set1_epi32(15));
            const __m256i high =
                _mm256_and_si256(_mm256_srli_epi32(w0, 16 + 2 * s), _mm256_set1_epi32(3));
            head.scale[s] = _mm256_sub_epi32(_mm256_or_si256(low, _mm256_slli_epi32(high, 4)),
                                             _mm256_set1_epi32(32));
        }
        return head;
    }
    static HWY_INLINE __m256i Scale(const Head& head, const uint8_t*, int, int s) {
        return head.scale[s];
    }
    template <class F>
    static HWY_INLINE void ForEachIndexSub(const uint8_t* a, const Head&, int h, F&& f) {
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
            __m256i index[8];
            for (int k = 0; k < 4; ++k) {
                const __m256i w = Word(a, 2 + 4 * s + k, h);
                index[k] = Low4(w);
                index[4 + k] = High4(w);
            }
            f(s, index);
        }
    }
    template <class F>
    static HWY_INLINE void ForEachSub(const uint8_t* a, const Head& head, int h, F&& f) {
        Iq4ForEachSub<Iq4Xs>(a, head, h, f);
    }
};

}  // namespace packed

#endif  // HWY_TARGET == HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
