// AVX-512 micro-kernels of the integer GEMM: one panel of kPanelRows = 16 rows (one zmm per
// token) times 8, 4, 2 or 1 tokens of a tile of kTokenTile = 8 (the 8-token kernel for whole
// tiles, the others for the rest of the last tile and for batches of a few tokens: each performs
// per row and token the same float operations, so the bits do not depend on the batch). Per-target
// code: included by gemm_simd.cpp once per Highway target, compiled for AVX-512 only.
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

// The same with the four bytes already broadcast to every lane of a register (one load shared by
// the rows of two panels).
inline __m512i DpbusdVnni(__m512i acc, __m512i w_u8, __m512i a) {
    asm("vpdpbusd %[a], %[w], %[acc]" : [acc] "+v"(acc) : [w] "v"(w_u8), [a] "v"(a));
    return acc;
}

// Four activation bytes broadcast to every 32-bit lane.
inline __m512i BroadcastFour(const int8_t* four) {
    int32_t bytes;
    std::memcpy(&bytes, four, 4);
    return _mm512_set1_epi32(bytes);
}

// The same without VNNI, exactly, through 16-bit products.
inline __m512i DpbusdEmulated(__m512i acc, __m512i w_u8, __m512i a) {
    const __m512i w_even = _mm512_and_si512(w_u8, _mm512_set1_epi16(0x00FF));
    const __m512i w_odd = _mm512_srli_epi16(w_u8, 8);
    const __m512i a_even = _mm512_srai_epi16(_mm512_slli_epi16(a, 8), 8);
    const __m512i a_odd = _mm512_srai_epi16(a, 8);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(w_even, a_even));
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w_odd, a_odd));
}
inline __m512i DpbusdEmulated(__m512i acc, __m512i w_u8, const int8_t* four) {
    return DpbusdEmulated(acc, w_u8, BroadcastFour(four));
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

// dot[r][t] = the exact integer dot product of one sub-block of kSub values of the 16 rows of
// panel r (its bytes at q[r]) with token t of T in a tile of W (act and corr point at the first of
// the T): starts at the token's correction for the + 128 of the weights. With few chains the
// chain of vpdpbusd into one accumulator would set the pace (5 cycles each), so even and odd
// groups go to two accumulators added at the end: integer sums, so the result is the same.
// Zen 5 loads at most two vectors a cycle, broadcasts included, the rate of vpdpbusd: one panel
// loads its weights and then each token's four bytes per instruction (9 loads per 8 vpdpbusd
// with 8 tokens), so two panels share each token's broadcast (6 loads per 8 with 4 tokens).
template <int R, int T, int W, int kSub, bool kVnni>
HWY_INLINE void SubBlockDots(const uint8_t* const (&q)[R], const int8_t* act, const int32_t* corr,
                             __m512i (&dot)[R][T]) {
    constexpr int kChains = R * T <= 2 ? 2 : 1;
    __m512i part[kChains][R][T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
        const __m512i start = _mm512_set1_epi32(corr[t]);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
            part[0][r][t] = start;
            if constexpr (kChains == 2) part[1][r][t] = _mm512_setzero_si512();
        }
    }
    for (int g0 = 0; g0 < kSub / 4; g0 += kChains) {
#pragma GCC unroll 2
        for (int c = 0; c < kChains; ++c) {
            const int g = g0 + c;
            __m512i w[R];
#pragma GCC unroll 2
            for (int r = 0; r < R; ++r) w[r] = _mm512_load_si512(q[r] + g * 4 * kPanelRows);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const int8_t* four = act + (g * W + t) * 4;
                if constexpr (R == 1) {  // the broadcast folded into vpdpbusd's operand
                    part[c][0][t] = kVnni ? DpbusdVnni(part[c][0][t], w[0], four)
                                          : DpbusdEmulated(part[c][0][t], w[0], four);
                } else {
                    const __m512i a = BroadcastFour(four);
#pragma GCC unroll 2
                    for (int r = 0; r < R; ++r) {
                        part[c][r][t] = kVnni ? DpbusdVnni(part[c][r][t], w[r], a)
                                              : DpbusdEmulated(part[c][r][t], w[r], a);
                    }
                }
            }
        }
    }
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            dot[r][t] =
                kChains == 2 ? _mm512_add_epi32(part[0][r][t], part[1][r][t]) : part[0][r][t];
        }
    }
}

// Where a kernel finds its T tokens: slot `slot` of tile `tile` and the next T - 1, and which
// block of the activation row the panel's block 0 is (a panel may hold a chunk of the columns).
struct TokenRun {
    int64_t tile;
    int slot;
    int64_t block0;
};

// 32-value blocks (Q4_0, Q5_0, Q8_0, IQ4_NL; Q4_1 and Q5_1 with kMin) of R panels. Per row and
// token the float operations are, block after block: sd = d * d_a, acc = fma(float(dot), sd, acc),
// and with kMin acc = fma(m, s_a, acc): the same whatever T and R, so every token count and panel
// pairing gives the same bits.
template <int R, int T, int W, bool kMin, bool kVnni>
HWY_INLINE void Block32Blocks(const IntPanel* p, const IntActivations& a, const TokenRun& run,
                              __m512 (&acc)[R][T]) {
    const int8_t* act = a.q_tile(run.tile) + run.slot * 4;
    const int32_t* corr = a.corr + a.sub_tile(run.tile) + run.slot;
    const float* d = a.d + a.block_tile(run.tile) + run.slot;
    const float* sum = kMin ? a.sum + a.block_tile(run.tile) + run.slot : nullptr;
    for (int64_t b = 0; b < p[0].n_blocks; ++b) {
        const int64_t ab = run.block0 + b;  // block of the activation row
        const uint8_t* q[R];
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) q[r] = p[r].q + b * 32 * kPanelRows;
        __m512i dot[R][T];
        SubBlockDots<R, T, W, 32, kVnni>(q, act + ab * 32 * W, corr + ab * W, dot);
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
            const __m512 dw = _mm512_load_ps(p[r].d + b * kPanelRows);
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const __m512 sd = _mm512_mul_ps(dw, _mm512_set1_ps(d[ab * W + t]));
                acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[r][t]), sd, acc[r][t]);
            }
            if constexpr (kMin) {
                const __m512 offset = _mm512_load_ps(p[r].min_scale + b * kPanelRows);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    acc[r][t] = _mm512_fmadd_ps(offset, _mm512_set1_ps(sum[ab * W + t]), acc[r][t]);
                }
            }
        }
    }
}

// 256-value blocks of 256 / kSub sub-blocks of kSub values (K-quants, IQ4_XS, TQ1_0, TQ2_0) of R
// panels. Per row and token, once per block: acc = fma(d_a, fma(float(msum), -dmin, float(isum) *
// d), acc) with kMin, else acc = fma(float(isum), d * d_a, acc); isum and msum are exact integers.
template <int R, int T, int W, int kSub, bool kMin, bool kVnni>
HWY_INLINE void SuperBlockBlocks(const IntPanel* p, const IntActivations& a, const TokenRun& run,
                                 __m512 (&acc)[R][T]) {
    constexpr int kSubs = 256 / kSub;
    const int8_t* act = a.q_tile(run.tile) + run.slot * 4;
    const int32_t* corr = a.corr + a.sub_tile(run.tile) + run.slot;
    const float* d = a.d + a.block_tile(run.tile) + run.slot;
    for (int64_t b = 0; b < p[0].n_blocks; ++b) {
        const int64_t ab = run.block0 + b;
        __m512i isum[R][T];
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) isum[r][t] = _mm512_setzero_si512();
        }
        for (int j = 0; j < kSubs; ++j) {
            const int64_t s = b * kSubs + j, as = ab * kSubs + j;
            const uint8_t* q[R];
#pragma GCC unroll 2
            for (int r = 0; r < R; ++r) q[r] = p[r].q + s * kSub * kPanelRows;
            __m512i dot[R][T];
            SubBlockDots<R, T, W, kSub, kVnni>(q, act + as * kSub * W, corr + as * W, dot);
#pragma GCC unroll 2
            for (int r = 0; r < R; ++r) {
                const __m512i scale = _mm512_load_si512(p[r].scale + s * kPanelRows);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    isum[r][t] = _mm512_add_epi32(isum[r][t], _mm512_mullo_epi32(dot[r][t], scale));
                }
            }
        }
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
            const __m512 dw = _mm512_load_ps(p[r].d + b * kPanelRows);
            if constexpr (kMin) {
                __m512i msum[T];
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) msum[t] = _mm512_setzero_si512();
                const int32_t* bsum =
                    a.bsum + a.pair_tile(run.tile) + ab * (kSubs / 2) * W + run.slot;
                for (int j = 0; j < kSubs / 2; ++j) {
                    const __m512i mins =
                        _mm512_load_si512(p[r].mins + (b * (kSubs / 2) + j) * kPanelRows);
#pragma GCC unroll 8
                    for (int t = 0; t < T; ++t) {
                        msum[t] = Dpwssd<kVnni>(msum[t], mins, bsum + j * W + t);
                    }
                }
                const __m512 neg_dmin = _mm512_load_ps(p[r].min_scale + b * kPanelRows);
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    const __m512 block =
                        _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum[t]), neg_dmin,
                                        _mm512_mul_ps(_mm512_cvtepi32_ps(isum[r][t]), dw));
                    acc[r][t] = _mm512_fmadd_ps(block, _mm512_set1_ps(d[ab * W + t]), acc[r][t]);
                }
            } else {
#pragma GCC unroll 8
                for (int t = 0; t < T; ++t) {
                    const __m512 sd = _mm512_mul_ps(dw, _mm512_set1_ps(d[ab * W + t]));
                    acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][t]), sd, acc[r][t]);
                }
            }
        }
    }
}

// T tokens of one run against R panels of consecutive rows (panel r's in y + 16 r): the
// accumulators start at 0, or at the values in y when `accumulate` (the panels hold a later chunk
// of the columns: stored and reloaded floats are the same floats, so chunking changes no bit), and
// end in y (the n_valid_rows valid rows only, counted over the R panels).
template <int R, int T, class Blocks>
HWY_INLINE void RunTile(const IntPanel* p, const IntActivations& a, const TokenRun& run, float* y,
                        int64_t y_stride, int n_valid_rows, bool accumulate, Blocks blocks) {
    __mmask16 mask[R];
    __m512 acc[R][T];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
        mask[r] = static_cast<__mmask16>((1u << PanelValidRows(n_valid_rows, r)) - 1u);
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            acc[r][t] = accumulate
                            ? _mm512_maskz_loadu_ps(mask[r], y + t * y_stride + r * kPanelRows)
                            : _mm512_setzero_ps();
        }
    }
    blocks(p, a, run, acc);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) {
            _mm512_mask_storeu_ps(y + t * y_stride + r * kPanelRows, mask[r], acc[r][t]);
        }
    }
}

using TileKernel = void (*)(const IntPanel*, const IntActivations&, const TokenRun&, float*,
                            int64_t, int, bool);

template <int R, int T, int W, bool kMin, bool kVnni>
void Block32Tile(const IntPanel* p, const IntActivations& a, const TokenRun& run, float* y,
                 int64_t y_stride, int n_valid_rows, bool accumulate) {
    RunTile<R, T>(p, a, run, y, y_stride, n_valid_rows, accumulate,
                  [](const IntPanel* pp, const IntActivations& aa, const TokenRun& rr,
                     __m512(&acc)[R][T]) { Block32Blocks<R, T, W, kMin, kVnni>(pp, aa, rr, acc); });
}

template <int R, int T, int W, int kSub, bool kMin, bool kVnni>
void SuperBlockTile(const IntPanel* p, const IntActivations& a, const TokenRun& run, float* y,
                    int64_t y_stride, int n_valid_rows, bool accumulate) {
    RunTile<R, T>(
        p, a, run, y, y_stride, n_valid_rows, accumulate,
        [](const IntPanel* pp, const IntActivations& aa, const TokenRun& rr, __m512(&acc)[R][T]) {
            SuperBlockBlocks<R, T, W, kSub, kMin, kVnni>(pp, aa, rr, acc);
        });
}

template <int R, int T, int W, bool kVnni>
TileKernel PickTileKernel(const IntPanel& p) {
    if (p.subs_per_block == 1) {
        return p.has_min ? Block32Tile<R, T, W, true, kVnni> : Block32Tile<R, T, W, false, kVnni>;
    }
    if (p.sub_size == 32) {
        return p.has_min ? SuperBlockTile<R, T, W, 32, true, kVnni>
                         : SuperBlockTile<R, T, W, 32, false, kVnni>;
    }
    return p.has_min ? SuperBlockTile<R, T, W, 16, true, kVnni>
                     : SuperBlockTile<R, T, W, 16, false, kVnni>;
}

// The kernels of R panels for 8 (one panel only: two would spill), 4, 2 and 1 tokens of 8-token
// tiles, and for a lone token (tiles of 1).
struct TileKernels {
    TileKernel k8, k4, k2, k1, lone;
};
template <int R, bool kVnni>
TileKernels PickTileKernels(const IntPanel& p) {
    return {R == 1 ? PickTileKernel<1, 8, kTokenTile, kVnni>(p) : nullptr,
            PickTileKernel<R, 4, kTokenTile, kVnni>(p), PickTileKernel<R, 2, kTokenTile, kVnni>(p),
            PickTileKernel<R, 1, kTokenTile, kVnni>(p), PickTileKernel<R, 1, 1, kVnni>(p)};
}
template <int R>
TileKernels PickTileKernels(const IntPanel& p) {
    return x86_vnni_available() ? PickTileKernels<R, true>(p) : PickTileKernels<R, false>(p);
}

// Every token against n_panels (1 or 2) panels of consecutive rows, of the same columns: one panel
// takes whole tiles of 8 tokens, two take runs of 4, and the rest of the last tile goes as 4, 2
// and 1 tokens, so that no padding token is multiplied (1 token costs an eighth of a tile).
inline void GemmIntPanelsAvx3(const IntPanel* p, int n_panels, const IntActivations& a,
                              int64_t block0, int64_t n_tokens, float* y, int64_t y_stride,
                              int n_valid_rows, bool accumulate) {
    const TileKernels k = n_panels == 2 ? PickTileKernels<2>(p[0]) : PickTileKernels<1>(p[0]);
    if (a.width == 1) {
        for (int64_t t = 0; t < n_tokens; ++t) {
            k.lone(p, a, TokenRun{t, 0, block0}, y + t * y_stride, y_stride, n_valid_rows,
                   accumulate);
        }
        return;
    }
    int64_t t = 0;
    auto run = [&](TileKernel kernel, int count) {
        const TokenRun at{t / kTokenTile, static_cast<int>(t % kTokenTile), block0};
        kernel(p, a, at, y + t * y_stride, y_stride, n_valid_rows, accumulate);
        t += count;
    };
    if (k.k8 != nullptr) {
        while (t + kTokenTile <= n_tokens) run(k.k8, kTokenTile);
    }
    while (t + 4 <= n_tokens) run(k.k4, 4);
    if (t + 2 <= n_tokens) run(k.k2, 2);
    if (t < n_tokens) run(k.k1, 1);
}

#endif  // HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
