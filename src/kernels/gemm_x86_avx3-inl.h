// AVX-512 micro-kernels of the integer GEMM: one panel of kPanelRows = 16 rows (one zmm per
// token) times a tile of kTokenTile = 8 tokens. Per-target code: included by gemm_simd.cpp once
// per Highway target, compiled for AVX-512 only.
//
// Zen 4 runs vpdpbusd, vpmulld, vmulps and vfmaddps on the same two pipes (measured: each of
// them costs one vpdpbusd slot), while vcvtdq2ps and vpaddd go elsewhere. So every multiply per
// sub-block and token takes the place of one of the 4-8 vpdpbusd of that sub-block:
//   32-value blocks: two per block and token (d * d_a, then the multiply-add), 80% at best;
//   256-value blocks: the sub-block sums stay integers (vpmulld by the integer scale, vpaddd)
//     and the mins go through vpdpwssd on int16 pairs, leaving 2-3 float operations per block,
//     not per sub-block: one slot per sub-block and token plus a few per block.
// vpdpbusd and vpdpwssd (AVX512-VNNI) go through inline assembly, so that the rest of the target
// needs no extra compiler flags, or through their exact emulations without VNNI.

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GEMM_X86_AVX3_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GEMM_X86_AVX3_INL_H_
#undef MINFER_KERNELS_GEMM_X86_AVX3_INL_H_
#else
#define MINFER_KERNELS_GEMM_X86_AVX3_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3

// acc += per 32-bit lane, the 4 products of unsigned bytes of w with the signed bytes `four`
// (broadcast to every lane from memory, so it costs no extra instruction).
inline __m512i DpbusdVnni(__m512i acc, __m512i w_u8, const int8_t* four) {
    asm("vpdpbusd %[a]%{1to16%}, %[w], %[acc]"
        : [acc] "+v"(acc)
        : [w] "v"(w_u8), [a] "m"(*reinterpret_cast<const int32_t*>(four)));
    return acc;
}

// The same without VNNI, exactly, through 16-bit products.
inline __m512i DpbusdEmulated(__m512i acc, __m512i w_u8, const int8_t* four) {
    int32_t bytes;
    std::memcpy(&bytes, four, 4);
    const __m512i a = _mm512_set1_epi32(bytes);
    const __m512i w_even = _mm512_and_si512(w_u8, _mm512_set1_epi16(0x00FF));
    const __m512i w_odd = _mm512_srli_epi16(w_u8, 8);
    const __m512i a_even = _mm512_srai_epi16(_mm512_slli_epi16(a, 8), 8);
    const __m512i a_odd = _mm512_srai_epi16(a, 8);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(w_even, a_even));
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w_odd, a_odd));
}

// acc += per 32-bit lane, the 2 products of the int16 halves of m with those of `pair`
// (broadcast from memory).
template <bool kVnni>
inline __m512i Dpwssd(__m512i acc, __m512i m, const int32_t* pair) {
    if constexpr (kVnni) {
        asm("vpdpwssd %[a]%{1to16%}, %[m], %[acc]" : [acc] "+v"(acc) : [m] "v"(m), [a] "m"(*pair));
        return acc;
    }
    return _mm512_add_epi32(acc, _mm512_madd_epi16(m, _mm512_set1_epi32(*pair)));
}

// dot[t] = the exact integer dot product of one sub-block of kSub values of the 16 panel rows
// with token t: starts at the token's correction for the + 128 of the weights.
template <int kSub, bool kVnni>
HWY_INLINE void SubBlockDots(const uint8_t* q, const int8_t* act, const int32_t* corr,
                             __m512i (&dot)[kTokenTile]) {
#pragma GCC unroll 8
    for (int t = 0; t < kTokenTile; ++t) dot[t] = _mm512_set1_epi32(corr[t]);
    for (int g = 0; g < kSub / 4; ++g) {
        const __m512i w = _mm512_load_si512(q + g * 4 * kPanelRows);
#pragma GCC unroll 8
        for (int t = 0; t < kTokenTile; ++t) {
            const int8_t* four = act + (g * kTokenTile + t) * 4;
            dot[t] = kVnni ? DpbusdVnni(dot[t], w, four) : DpbusdEmulated(dot[t], w, four);
        }
    }
}

HWY_INLINE void StoreTile(const __m512 (&acc)[kTokenTile], float* y, int64_t y_stride,
                          int n_valid_rows, int n_valid_tokens) {
    const auto mask = static_cast<__mmask16>((1u << n_valid_rows) - 1u);
#pragma GCC unroll 8
    for (int t = 0; t < kTokenTile; ++t) {
        if (t < n_valid_tokens) _mm512_mask_storeu_ps(y + t * y_stride, mask, acc[t]);
    }
}

// 32-value blocks (Q4_0, Q5_0, Q8_0, IQ4_NL; Q4_1 and Q5_1 with kMin).
template <bool kMin, bool kVnni>
void Block32Tile(const IntPanel& p, const IntActivations& a, int64_t tile, float* y,
                 int64_t y_stride, int n_valid_rows, int n_valid_tokens) {
    __m512 acc[kTokenTile];
#pragma GCC unroll 8
    for (int t = 0; t < kTokenTile; ++t) acc[t] = _mm512_setzero_ps();
    const int8_t* act = a.q_tile(tile);
    const int32_t* corr = a.corr + a.sub_tile(tile);
    const float* d = a.d + a.block_tile(tile);
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        __m512i dot[kTokenTile];
        SubBlockDots<32, kVnni>(p.q + b * 32 * kPanelRows, act + b * 32 * kTokenTile,
                                corr + b * kTokenTile, dot);
        const __m512 dw = _mm512_load_ps(p.d + b * kPanelRows);
#pragma GCC unroll 8
        for (int t = 0; t < kTokenTile; ++t) {
            const __m512 sd = _mm512_mul_ps(dw, _mm512_set1_ps(d[b * kTokenTile + t]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[t]), sd, acc[t]);
        }
        if constexpr (kMin) {
            const __m512 offset = _mm512_load_ps(p.min_scale + b * kPanelRows);
            const float* sum = a.sum + a.block_tile(tile) + b * kTokenTile;
#pragma GCC unroll 8
            for (int t = 0; t < kTokenTile; ++t) {
                acc[t] = _mm512_fmadd_ps(offset, _mm512_set1_ps(sum[t]), acc[t]);
            }
        }
    }
    StoreTile(acc, y, y_stride, n_valid_rows, n_valid_tokens);
}

// 256-value blocks of kSubs sub-blocks of kSub values (K-quants, IQ4_XS, TQ1_0, TQ2_0).
template <int kSub, bool kMin, bool kVnni>
void SuperBlockTile(const IntPanel& p, const IntActivations& a, int64_t tile, float* y,
                    int64_t y_stride, int n_valid_rows, int n_valid_tokens) {
    constexpr int kSubs = 256 / kSub;
    __m512 acc[kTokenTile];
#pragma GCC unroll 8
    for (int t = 0; t < kTokenTile; ++t) acc[t] = _mm512_setzero_ps();
    const int8_t* act = a.q_tile(tile);
    const int32_t* corr = a.corr + a.sub_tile(tile);
    const float* d = a.d + a.block_tile(tile);
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        __m512i isum[kTokenTile];
#pragma GCC unroll 8
        for (int t = 0; t < kTokenTile; ++t) isum[t] = _mm512_setzero_si512();
        for (int j = 0; j < kSubs; ++j) {
            const int64_t s = b * kSubs + j;
            __m512i dot[kTokenTile];
            SubBlockDots<kSub, kVnni>(p.q + s * kSub * kPanelRows, act + s * kSub * kTokenTile,
                                      corr + s * kTokenTile, dot);
            const __m512i scale = _mm512_load_si512(p.scale + s * kPanelRows);
#pragma GCC unroll 8
            for (int t = 0; t < kTokenTile; ++t) {
                isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot[t], scale));
            }
        }
        const __m512 dw = _mm512_load_ps(p.d + b * kPanelRows);
        if constexpr (kMin) {
            __m512i msum[kTokenTile];
#pragma GCC unroll 8
            for (int t = 0; t < kTokenTile; ++t) msum[t] = _mm512_setzero_si512();
            const int32_t* bsum = a.bsum + a.pair_tile(tile) + b * (kSubs / 2) * kTokenTile;
            for (int j = 0; j < kSubs / 2; ++j) {
                const __m512i mins = _mm512_load_si512(p.mins + (b * (kSubs / 2) + j) * kPanelRows);
#pragma GCC unroll 8
                for (int t = 0; t < kTokenTile; ++t) {
                    msum[t] = Dpwssd<kVnni>(msum[t], mins, bsum + j * kTokenTile + t);
                }
            }
            const __m512 neg_dmin = _mm512_load_ps(p.min_scale + b * kPanelRows);
#pragma GCC unroll 8
            for (int t = 0; t < kTokenTile; ++t) {
                const __m512 block =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[t]), neg_dmin,
                                    _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), dw));
                acc[t] = _mm512_fmadd_ps(block, _mm512_set1_ps(d[b * kTokenTile + t]), acc[t]);
            }
        } else {
#pragma GCC unroll 8
            for (int t = 0; t < kTokenTile; ++t) {
                const __m512 sd = _mm512_mul_ps(dw, _mm512_set1_ps(d[b * kTokenTile + t]));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), sd, acc[t]);
            }
        }
    }
    StoreTile(acc, y, y_stride, n_valid_rows, n_valid_tokens);
}

using TileKernel = void (*)(const IntPanel&, const IntActivations&, int64_t, float*, int64_t, int,
                            int);

template <bool kVnni>
TileKernel PickTileKernel(const IntPanel& p) {
    if (p.subs_per_block == 1) {
        return p.has_min ? Block32Tile<true, kVnni> : Block32Tile<false, kVnni>;
    }
    if (p.sub_size == 32) {
        return p.has_min ? SuperBlockTile<32, true, kVnni> : SuperBlockTile<32, false, kVnni>;
    }
    return p.has_min ? SuperBlockTile<16, true, kVnni> : SuperBlockTile<16, false, kVnni>;
}

// Every token tile (the last one padded with zero activations) against one panel.
inline void GemmIntPanelAvx3(const IntPanel& p, const IntActivations& a, int64_t n_tokens, float* y,
                             int64_t y_stride, int n_valid_rows) {
    const TileKernel kernel =
        x86_vnni_available() ? PickTileKernel<true>(p) : PickTileKernel<false>(p);
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
        const auto n_valid_tokens = static_cast<int>(std::min<int64_t>(kTokenTile, n_tokens - t0));
        kernel(p, a, t0 / kTokenTile, y + t0 * y_stride, y_stride, n_valid_rows, n_valid_tokens);
    }
}

#endif  // HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
