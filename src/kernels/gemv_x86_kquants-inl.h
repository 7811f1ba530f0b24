// x86 GEMV kernels of the 256-value types against Q8_K activations: Q2_K, Q3_K, Q4_K, Q5_K,
// Q6_K and IQ4_XS.
// Per-target code: included by gemv_simd.cpp once per Highway target (AVX2 and AVX-512 only).

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GEMV_X86_KQUANTS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GEMV_X86_KQUANTS_INL_H_
#undef MINFER_KERNELS_GEMV_X86_KQUANTS_INL_H_
#else
#define MINFER_KERNELS_GEMV_X86_KQUANTS_INL_H_
#endif

#include <cstring>
#include <type_traits>
#include <vector>

#include "hwy/highway.h"
#include "kernels/gemv_x86_common-inl.h"
#include "quant/block_types.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

// The 8 six-bit scales (bytes 0-7) and mins (bytes 8-15) of a Q4_K / Q5_K super-block.
inline void KScalesMins(const uint8_t* packed, uint8_t out[16]) {
    uint32_t u[4];
    std::memcpy(u, packed, 12);
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
    const uint32_t mins_low = u[1] & kLow6;
    u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
    u[2] = mins_low;
    u[0] &= kLow6;
    std::memcpy(out, u, 16);
}

// Sums of the activation's bsums in pairs (one per Q4_K sub-block of 32), per super-block.
void PrepareBsumPairs(const block_q8_K* a, int64_t n_blocks, std::vector<Int32x8>& out) {
    out.resize(static_cast<std::size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) {
        for (int j = 0; j < 8; ++j) out[b].lanes[j] = a[b].bsums[2 * j] + a[b].bsums[2 * j + 1];
    }
}

// Q4_K and Q5_K against Q8_K: per sub-block of 32, vpmaddubsw then vpmaddwd with the
// sub-block's scale (instead of 1), so the scales cost nothing extra; the mins multiply the
// activation's bsums. Q5_K adds a fifth bit from qh (bit 2j for sub-block 2j, 2j + 1 for 2j + 1).
template <class Block>
float DotQ45_K(const Block* w, const block_q8_K* a, const Int32x8* bsum_pairs, int64_t n_blocks) {
    constexpr bool kFive = std::is_same_v<Block, block_q5_K>;
    __m256 acc = _mm256_setzero_ps();
    __m256 min_acc = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n_blocks; ++b) {
        alignas(16) uint8_t sm[16];
        KScalesMins(w[b].scales, sm);
        const __m128i packed = _mm_load_si128(reinterpret_cast<const __m128i*>(sm));
        const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
        const __m256i mins = _mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8));
        const __m256i min_products = _mm256_mullo_epi32(
            mins, _mm256_load_si256(reinterpret_cast<const __m256i*>(&bsum_pairs[b])));
        __m256i isum = _mm256_setzero_si256();
        __m256i qh = _mm256_setzero_si256();
        if constexpr (kFive) qh = Load256(w[b].qh);
        for (int j = 0; j < 4; ++j) {
            const __m256i q = Load256(w[b].qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (kFive) {
                const __m256i bit16 = _mm256_set1_epi8(0x10);
                const __m256i m_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
                const __m256i m_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1)));
                lo = _mm256_or_si256(
                    lo,
                    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m_lo), m_lo), bit16));
                hi = _mm256_or_si256(
                    hi,
                    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m_hi), m_hi), bit16));
            }
            const __m256i p_lo = _mm256_maddubs_epi16(lo, Load256(a[b].qs + 64 * j));
            const __m256i p_hi = _mm256_maddubs_epi16(hi, Load256(a[b].qs + 64 * j + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_lo, BroadcastI16(scales, 2 * j)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_hi, BroadcastI16(scales, 2 * j + 1)));
        }
        const float da = a[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(HalfToFloat(w[b].d) * da),
                              acc);
        min_acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                                  _mm256_set1_ps(HalfToFloat(w[b].dmin) * da), min_acc);
    }
    return HorizontalSum(_mm256_sub_ps(acc, min_acc));
}

// Q2_K and Q3_K against Q8_K: 2-bit planes (Q3_K adds a high bit from hmask and an offset of 4),
// 16 sub-blocks of 16. Each 32-value vector spans two sub-blocks, so the scale vector holds
// sub-block 2k in its low half and 2k + 1 in its high half, as in Q6_K.
template <class Block>
float DotQ23_K(const Block* w, const block_q8_K* a, int64_t n_blocks) {
    constexpr bool kThree = std::is_same_v<Block, block_q3_K>;
    __m256 acc = _mm256_setzero_ps();
    __m256 min_acc = _mm256_setzero_ps();
    const __m256i three = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n_blocks; ++b) {
        alignas(16) int8_t scales[16];
        __m256i isum;
        __m256i min_products = _mm256_setzero_si256();
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
        if constexpr (kThree) {
            for (int j = 0; j < 16; ++j) {
                const int low = j < 8 ? (w[b].scales[j] & 0x0F) : (w[b].scales[j - 8] >> 4);
                const int high = (w[b].scales[8 + (j % 4)] >> (2 * (j / 4))) & 3;
                scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
            }
            // Values are stored as 0..7 meaning -4..3: start at -4 * sum(scale * bsum).
            const __m256i offset = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(scales))),
                bsums);
            isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 2));
        } else {
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
            _mm_store_si128(reinterpret_cast<__m128i*>(scales),
                            _mm_and_si128(packed, _mm_set1_epi8(0x0F)));
            const __m128i mins = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
            min_products = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mins), bsums);
            isum = _mm256_setzero_si256();
        }
        const __m128i scales8 = _mm_load_si128(reinterpret_cast<const __m128i*>(scales));
        for (int half = 0; half < 2; ++half) {
            const __m256i q = Load256(w[b].qs + 32 * half);
            const int8_t* q8 = a[b].qs + 128 * half;
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_unpackhi_epi64(scales8, scales8)));
            __m256i hmask = _mm256_setzero_si256();
            if constexpr (kThree) hmask = Load256(w[b].hmask);
            for (int plane = 0; plane < 4; ++plane) {
                __m256i v =
                    _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * plane)), three);
                if constexpr (kThree) {
                    const __m256i bit =
                        _mm256_set1_epi8(static_cast<char>(1 << (4 * half + plane)));
                    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
                    v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(4)));
                }
                const __m256i p = _mm256_maddubs_epi16(v, Load256(q8 + 32 * plane));
                const __m256i s = _mm256_blend_epi32(BroadcastI16(sc, 2 * plane),
                                                     BroadcastI16(sc, 2 * plane + 1), 0xF0);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
            }
        }
        const float da = a[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(HalfToFloat(w[b].d) * da),
                              acc);
        if constexpr (!kThree) {
            min_acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                                      _mm256_set1_ps(HalfToFloat(w[b].dmin) * da), min_acc);
        }
    }
    return HorizontalSum(_mm256_sub_ps(acc, min_acc));
}

// IQ4_XS against Q8_K: 8 sub-blocks of 32 with 6-bit scales (minus 32); the nibbles map through
// the IQ4_NL table to signed values, so the products go through |w| x sign(a, w).
float DotIq4Xs(const block_iq4_xs* w, const block_q8_K* a, int64_t n_blocks) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const int low = (w[b].scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
            const int high = (w[b].scales_h >> (2 * j)) & 3;
            const auto scale = static_cast<int16_t>((low | (high << 4)) - 32);
            const __m128i packed =
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * j));
            const __m256i codes =
                _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(packed),
                                                         _mm_srli_epi16(packed, 4), 1),
                                 low4);
            const __m256i values = _mm256_shuffle_epi8(table, codes);
            const __m256i q8 = Load256(a[b].qs + 32 * j);
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(values, values),
                                                   _mm256_sign_epi8(q8, values));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(scale)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(HalfToFloat(w[b].d) * a[b].d), acc);
    }
    return HorizontalSum(acc);
}

// Q6_K against Q8_K: 6-bit values used unsigned (0..63), the offset of 32 folded in as
// -32 * sum(scale * bsum); one 32-value vector spans two sub-blocks of 16 (two scales).
float DotQ6_K(const block_q6_K* w, const block_q8_K* a, int64_t n_blocks) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
        const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
        const __m256i offset = _mm256_madd_epi16(
            scales16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = w[b].ql + 64 * half;
            const uint8_t* qh = w[b].qh + 32 * half;
            const int8_t* q8 = a[b].qs + 128 * half;
            // The 8 scales of this half, as 16-bit values, in both 128-bit halves.
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_unpackhi_epi64(scales8, scales8)));
            const __m256i l0 = Load256(ql);
            const __m256i l1 = Load256(ql + 32);
            const __m256i h = Load256(qh);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, low4),
                                _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45)),
                _mm256_or_si256(_mm256_and_si256(l1, low4),
                                _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                                _mm256_and_si256(h, bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45))};
            for (int k = 0; k < 4; ++k) {
                const __m256i p = _mm256_maddubs_epi16(q[k], Load256(q8 + 32 * k));
                // Scale 2k for the low 16 values, 2k + 1 for the high 16.
                const __m256i s =
                    _mm256_blend_epi32(BroadcastI16(sc, 2 * k), BroadcastI16(sc, 2 * k + 1), 0xF0);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(HalfToFloat(w[b].d) * a[b].d), acc);
    }
    return HorizontalSum(acc);
}

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
