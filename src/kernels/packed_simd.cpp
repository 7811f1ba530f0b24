// Matmul on the interleaved layout (packed_layout.h), compiled once per Highway target; AVX-512,
// AVX2 and aarch64's NEON (other targets report "not available" and matmul reads the file's
// layout; aarch64 runs NEON for this file also where the CPU has SVE, so that the dispatch finds
// these kernels).
//
// Few tokens (decoding: 1 to 31 sequences) multiply the blocks as they are decoded, in registers
// (PackedTile): per group of 16 rows, runs of 16 (two tiles, 32-value types), 8, 4, 2 or 1 tokens
// of the activation tiles, one zmm accumulator per token. Many tokens (prefill) decode each group
// once into a GEMM panel (FillPanel) that gemm_int_panel_simd then multiplies with every token.
// Both perform, per row and token, the float operations of the panel kernels (gemm_x86_avx3-inl.h's
// Block32Blocks and SuperBlockBlocks) in the same order on the same exact integer sums, so a
// token's outputs have the same bits whatever the batch, and the same bits as from the file's
// layout. AVX2 does the same on halves of 8 rows (PackedTileAvx2, FillPanelAvx2: runs of 4, 2 or 1
// tokens).

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/packed_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format off: the per-target headers must follow highway.h
#include "kernels/gemm_x86_avx3-inl.h"
#include "kernels/packed_arm_neon-inl.h"
#include "kernels/packed_x86_avx2-inl.h"
#include "kernels/packed_x86_avx3-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

// Defined anew for each target (this file is compiled once per target).
#undef MINFER_PACKED_KERNELS
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2 || defined(MINFER_PACKED_ARM_NEON)
#define MINFER_PACKED_KERNELS 1

// One group's chunk of one stripe of a packed matrix: blocks b0 .. b0 + n_blocks - 1 of its rows.
struct PackedChunk {
    const uint8_t* base;
    PackedLayout l;
    int64_t b0, n_blocks;
    int64_t prefetch_bytes;  // how far ahead the x86 kernels ask for lines, where they do

    // Codes and 16 f16 d (types with d units only; never read otherwise) of the chunk's block b
    // (counted from b0).
    const uint8_t* codes(int64_t b) const { return base + l.a_offset(b); }
    const uint8_t* d(int64_t b) const { return base + l.d_offset(b); }
};

static_assert(kPackedRows == kPanelRows, "a group fills one GEMM panel");

PackedChunk ChunkAt(const WeightMatrix& w, const PackedLayout& l, int64_t g, int64_t k) {
    const auto* base = reinterpret_cast<const uint8_t*>(w.packed.data()) + l.chunk_offset(g, k);
    return {base, l, l.stripe_begin(k), l.stripe_size(k), x86_software_prefetch_distance()};
}

// Calls f(chunk, y + the group's first row, its valid rows) for the chunks of groups [g0, g1),
// stripe by stripe (packed_layout.h: the activations of a stripe stay in L1).
template <class F>
HWY_INLINE void ForEachChunk(const WeightMatrix& w, const PackedLayout& l, int64_t g0, int64_t g1,
                             float* y, F&& f) {
    for (int64_t k = 0; k < l.n_stripes(); ++k) {
        for (int64_t gi = g0; gi < g1; ++gi) {
            const int64_t row0 = gi * kPackedRows;
            f(ChunkAt(w, l, gi, k), y + row0,
              static_cast<int>(std::min<int64_t>(kPackedRows, w.n_rows - row0)));
        }
    }
}

#endif  // AVX3, AVX2 or aarch64's NEON

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2
// The kernels ask for lines ahead of their reads where the CPU's prefetchers alone fall behind
// (software_prefetch_pays(); the AVX2 measurements are at its kernels below), g.prefetch_bytes
// ahead (software_prefetch_distance_on: how far was measured on Zen 5). The AVX-512 kernels
// on 2 vCPUs of an Intel Xeon (AVX-512 VNNI, 6 December 2026, Qwen2 0.5B shape by llama-quantize,
// three alternations, tokens/s without / with, 2048 bytes ahead): one sequence Q4_0 49.3-50.5 /
// 59.0-61.3, Q4_K_M 45.6 / 52.9-54.6, Q8_0 39.2-39.4 / 42.4-44.3, Q6_K 41.1-41.4 / 44.8-46.2; 16
// sequences 322 / 405 (Q4_0), 278-285 / 341-352 (Q4_K_M): the weights' loads had stalled 38 % of
// the Q4_0 tile's cycles. A whole block's lines at once, at its start (K-quants too: spread over
// the sub-blocks as AVX2 does was not measured here).
//
// The lines `distance` bytes ahead of bytes [begin, end) of a block.
template <bool kPrefetch>
HWY_INLINE void PrefetchRange(const uint8_t* codes, int64_t distance, int begin, int end) {
    if constexpr (!kPrefetch) return;
    for (int at = begin; at < end; at += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(codes + distance + at), _MM_HINT_T0);
    }
}
#endif

#if HWY_TARGET == HWY_AVX3

// A sub-block's OffsetCorrection (matmul_internal.h) for codes of offset kOffset, in every lane,
// from its corr in memory: a broadcast load and a shift, where the scalar form takes a shift, a
// multiply and a move from a general-purpose register per token and block. One core, the matrix
// in L2 (bench_kernels' InCache, Zen 5, GOP/s), 8 tokens: Q4_0 565-577 -> 610-632, Q8_0 512 ->
// 581-588, Q5_0 614-626 -> 633-648.
template <int kOffset>
HWY_INLINE __m512i OffsetCorrectionAvx3(const int32_t* corr) {
    if constexpr (kOffset == 0) {
        return _mm512_setzero_si512();
    } else {
        static_assert(kOffset > 0 && kOffset <= 128 && (kOffset & (kOffset - 1)) == 0);
        constexpr int kShift = 7 - std::countr_zero(static_cast<unsigned>(kOffset));
        static_assert(OffsetCorrection(-128 * 37, kOffset) == (-128 * 37) >> kShift);
        return _mm512_srai_epi32(_mm512_set1_epi32(*corr), kShift);
    }
}

// The float operations of the panel kernels for one block and one token, per row: isum the
// block's integer sums (the K-quants': scaled by their sub-blocks' scales), then the token's
// scale and, with mins, its s (Q4_1, Q5_1) or the sums of its sub-block pairs (Q4_K, Q5_K): of
// activation block b, slot `slot` of the tile whose arrays da, sum and bsum point at.
template <class Tr, int W, bool kVnni>
HWY_INLINE __m512 AddBlock(const typename Tr::Head& h, __m512i isum, const float* da,
                           const float* sum, const int32_t* bsum, int64_t b, int slot, __m512 acc) {
    if constexpr (Tr::kSubs == 1 || !Tr::kMin) {
        const __m512 sd = _mm512_mul_ps(h.d, _mm512_set1_ps(da[b * W + slot]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sd, acc);
        if constexpr (Tr::kMin) {  // Q4_1, Q5_1: + m * s_a
            acc = _mm512_fmadd_ps(h.min_scale, _mm512_set1_ps(sum[b * W + slot]), acc);
        }
        return acc;
    } else {
        __m512i msum = _mm512_setzero_si512();
        for (int j = 0; j < Tr::kSubs / 2; ++j) {
            msum = Dpwssd<kVnni>(msum, h.mins[j], bsum + (b * (Tr::kSubs / 2) + j) * W + slot);
        }
        const __m512 block = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), h.min_scale,
                                             _mm512_mul_ps(_mm512_cvtepi32_ps(isum), h.d));
        return _mm512_fmadd_ps(block, _mm512_set1_ps(da[b * W + slot]), acc);
    }
}

// T tokens of a run (slot run.slot of tile run.tile and the next T - 1, tiles of W) against every
// block of one chunk, into acc[t] (16 rows).
template <class Tr, int T, int W, bool kVnni, bool kPrefetch>
HWY_INLINE void PackedBlocks(const PackedChunk& g, const IntActivations& a, const TokenRun& run,
                             __m512 (&acc)[T]) {
    // The lines g.prefetch_bytes ahead of a block's codes, with the d unit before them (the
    // layout's one sequential run: past the chunk's end they are the next chunk's).
    const int first_line = g.l.has_d_units ? -64 : 0;
    const int block_bytes = static_cast<int>(g.l.a_bytes);
    constexpr int kGroups = Tr::kSub / 4;
    // With one or two tokens a single chain of vpdpbusd would set the pace: two chains, added.
    constexpr int kChains = T <= 2 ? 2 : 1;
    const int8_t* act = a.q_tile(run.tile) + run.slot * 4;
    const int32_t* corr = a.corr + a.sub_tile(run.tile) + run.slot;
    const float* da = a.d + a.block_tile(run.tile) + run.slot;
    const int32_t* bsum =
        Tr::kMin && Tr::kSubs > 1 ? a.bsum + a.pair_tile(run.tile) + run.slot : nullptr;
    const float* sum =
        Tr::kMin && Tr::kSubs == 1 ? a.sum + a.block_tile(run.tile) + run.slot : nullptr;
    for (int64_t local = 0; local < g.n_blocks; ++local) {
        const int64_t b = g.b0 + local;  // of the row: the activations' block
        const uint8_t* pa = g.codes(local);
        PrefetchRange<kPrefetch>(pa, g.prefetch_bytes, first_line, block_bytes);
        const typename Tr::Head h = Tr::Decode(pa, g.d(local));
        __m512i isum[T];
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
        Tr::ForEachSub(pa, h, [&](int s, const __m512i* v) HWY_ATTR {
            const int64_t as = b * Tr::kSubs + s;  // sub-block of the activation row
            __m512i part[kChains][T];
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                // The codes are value + kOffset: start at -kOffset * sum(a).
                // One or two tokens keep the scalar form: with the vector one, Q5_0's one-token
                // kernel went from 203-228 to 166-179 GOP/s (bench_kernels, in L2, Zen 5).
                if constexpr (T <= 2) {
                    part[0][t] =
                        Tr::kOffset == 0
                            ? _mm512_setzero_si512()
                            : _mm512_set1_epi32(OffsetCorrection(corr[as * W + t], Tr::kOffset));
                } else {
                    part[0][t] = OffsetCorrectionAvx3<Tr::kOffset>(corr + as * W + t);
                }
                if constexpr (kChains == 2) part[1][t] = _mm512_setzero_si512();
            }
#pragma GCC unroll 8
            for (int gi = 0; gi < kGroups; gi += kChains) {
#pragma GCC unroll 2
                for (int c = 0; c < kChains; ++c) {
#pragma GCC unroll 8
                    for (int t = 0; t < T; ++t) {
                        const int8_t* four = act + ((as * kGroups + gi + c) * W + t) * 4;
                        part[c][t] = kVnni ? DpbusdVnni(part[c][t], v[gi + c], four)
                                           : DpbusdEmulated(part[c][t], v[gi + c], four);
                    }
                }
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) {
                const __m512i dot =
                    kChains == 2 ? _mm512_add_epi32(part[0][t], part[1][t]) : part[0][t];
                if constexpr (Tr::kSubs == 1) {
                    isum[t] = dot;
                } else {
                    isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot, h.scale[s]));
                }
            }
        });
#pragma GCC unroll 8
        for (int t = 0; t < T; ++t)
            acc[t] = AddBlock<Tr, W, kVnni>(h, isum[t], da, sum, bsum, b, t, acc[t]);
    }
}

// Two whole activation tiles (2W tokens from tile `tile`) against every block of one chunk of a
// 32-value type: each block decoded once for the 16 tokens, where two runs of 8 decode it twice.
// Token after token, so that one partial sum is live beside the codes' 8 vectors and the 16
// accumulators (the out-of-order core overlaps the tokens' chains). Per row and token the
// operations of PackedBlocks, in the same order. One core, bench_kernels' Qwen2 0.5B shapes, 16
// tokens (Zen 5, 7 December 2026): 896 x 4864 Q4_0 258-260 -> 226-227 us, Q8_0 353-374 -> 312-323.
// The types with sub-blocks keep two runs of 8: their 16 tokens' sums beside the block's scales
// spill, and Q4_K (2048 x 5632) went from 734-760 to 763-769 us, Q6_K from 1057-1115 to 1138-1169.
// The per-block frame (pointers, prefetch, decode) repeats PackedBlocks' on purpose: the two
// behind one helper taking the block's body as a lambda measured 6-27 % slower at 8 and 16 tokens
// (GCC 12, InCache Q4_0 and Q8_0, three alternations, 7 December 2026).
template <class Tr, int W, bool kVnni, bool kPrefetch>
HWY_INLINE void PackedBlocksTwoTiles(const PackedChunk& g, const IntActivations& a, int64_t tile,
                                     __m512 (&acc)[2 * W]) {
    static_assert(Tr::kSubs == 1);
    const int first_line = g.l.has_d_units ? -64 : 0;
    const int block_bytes = static_cast<int>(g.l.a_bytes);
    constexpr int kGroups = Tr::kSub / 4;
    // Token t reads slot t % W of tile tile + t / W.
    const int8_t* act[2] = {a.q_tile(tile), a.q_tile(tile + 1)};
    const int32_t* corr[2] = {a.corr + a.sub_tile(tile), a.corr + a.sub_tile(tile + 1)};
    const float* da[2] = {a.d + a.block_tile(tile), a.d + a.block_tile(tile + 1)};
    const float* sum[2] = {nullptr, nullptr};
    if constexpr (Tr::kMin) {
        sum[0] = a.sum + a.block_tile(tile);
        sum[1] = a.sum + a.block_tile(tile + 1);
    }
    for (int64_t local = 0; local < g.n_blocks; ++local) {
        const int64_t b = g.b0 + local;  // of the row: the activations' block and sub-block
        const uint8_t* pa = g.codes(local);
        PrefetchRange<kPrefetch>(pa, g.prefetch_bytes, first_line, block_bytes);
        const typename Tr::Head h = Tr::Decode(pa, g.d(local));
        Tr::ForEachSub(pa, h, [&](int, const __m512i* v) HWY_ATTR {
#pragma GCC unroll 16
            for (int t = 0; t < 2 * W; ++t) {
                const int k = t / W, slot = t % W;
                __m512i dot = OffsetCorrectionAvx3<Tr::kOffset>(corr[k] + b * W + slot);
#pragma GCC unroll 8
                for (int gi = 0; gi < kGroups; ++gi) {
                    const int8_t* four = act[k] + ((b * kGroups + gi) * W + slot) * 4;
                    dot = kVnni ? DpbusdVnni(dot, v[gi], four) : DpbusdEmulated(dot, v[gi], four);
                }
                acc[t] = AddBlock<Tr, W, kVnni>(h, dot, da[k], sum[k], nullptr, b, slot, acc[t]);
            }
        });
    }
}

// T tokens from token t0 (tiles of W) against one chunk, stored to y[(t0 + t) * y_stride + r] for
// the group's valid rows. A chunk after a row's first continues the sums the previous one stored
// (a float stored and loaded is exact: the same operations in the same order as one long run).
template <class Tr, int T, int W, bool kVnni, bool kPrefetch>
void PackedTile(const PackedChunk& g, const IntActivations& a, int64_t t0, float* y,
                int64_t y_stride, __mmask16 rows) {
    __m512 acc[T];
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
        acc[t] =
            g.b0 == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(rows, y + (t0 + t) * y_stride);
    }
    if constexpr (T == 2 * W) {
        PackedBlocksTwoTiles<Tr, W, kVnni, kPrefetch>(g, a, t0 / W, acc);
    } else {
        PackedBlocks<Tr, T, W, kVnni, kPrefetch>(
            g, a, TokenRun{t0 / W, static_cast<int>(t0 % W), 0}, acc);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * y_stride, rows, acc[t]);
}

// A run of T tokens from token t against one chunk. The chunk's first run streams it in from
// memory and asks for the lines ahead (with kPrefetch); the later runs find it in L1.
template <class Tr, int T, bool kVnni, bool kPrefetch>
HWY_INLINE void PackedRun(const PackedChunk& g, const IntActivations& a, int64_t t, float* y,
                          int64_t y_stride, __mmask16 rows) {
    if (t == 0) {
        PackedTile<Tr, T, kTokenTile, kVnni, kPrefetch>(g, a, t, y, y_stride, rows);
    } else {
        PackedTile<Tr, T, kTokenTile, kVnni, false>(g, a, t, y, y_stride, rows);
    }
}

// Groups [g0, g1): runs of 16 (32-value types), 8, 4, 2 and 1 tokens against each chunk.
template <class Tr, bool kVnni, bool kPrefetch>
void PackedGroups(const WeightMatrix& w, const PackedLayout& l, int64_t g0, int64_t g1,
                  const IntActivations& a, int64_t n_tokens, float* y) {
    ForEachChunk(w, l, g0, g1, y, [&](const PackedChunk& g, float* yg, int valid) HWY_ATTR {
        const auto rows = static_cast<__mmask16>((1u << valid) - 1u);
        if (a.width == 1) {  // one token, dense activations
            PackedTile<Tr, 1, 1, kVnni, kPrefetch>(g, a, 0, yg, w.n_rows, rows);
            return;
        }
        int64_t t = 0;
        if constexpr (Tr::kSubs == 1) {
            for (; t + 2 * kTokenTile <= n_tokens; t += 2 * kTokenTile) {
                PackedRun<Tr, 2 * kTokenTile, kVnni, kPrefetch>(g, a, t, yg, w.n_rows, rows);
            }
        }
        for (; t + kTokenTile <= n_tokens; t += kTokenTile) {
            PackedRun<Tr, kTokenTile, kVnni, kPrefetch>(g, a, t, yg, w.n_rows, rows);
        }
        if (t + 4 <= n_tokens) {
            PackedRun<Tr, 4, kVnni, kPrefetch>(g, a, t, yg, w.n_rows, rows);
            t += 4;
        }
        if (t + 2 <= n_tokens) {
            PackedRun<Tr, 2, kVnni, kPrefetch>(g, a, t, yg, w.n_rows, rows);
            t += 2;
        }
        if (t < n_tokens) PackedRun<Tr, 1, kVnni, kPrefetch>(g, a, t, yg, w.n_rows, rows);
    });
}

// One chunk decoded into its blocks of a GEMM panel of all the group's columns, exactly as
// fill_int_panel unpacks the file's layout (codes + 128 - kOffset, the panel's scales).
template <class Tr>
void FillPanel(const PackedChunk& g, const IntPanel& panel) {
    constexpr int kGroups = Tr::kSub / 4;
    const IntPanel p = panel;  // local: the stores would make the compiler reload its fields
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(128 - Tr::kOffset));
    for (int64_t local = 0; local < g.n_blocks; ++local) {
        const int64_t b = g.b0 + local;  // of the row: the panel's block
        const uint8_t* pa = g.codes(local);
        const typename Tr::Head h = Tr::Decode(pa, g.d(local));
        Tr::ForEachSub(pa, h, [&](int s, const __m512i* v) HWY_ATTR {
            for (int gi = 0; gi < kGroups; ++gi) {
                const int64_t group = b * (Tr::kBlockValues / 4) + s * kGroups + gi;
                const __m512i codes = Tr::kOffset == 128 ? v[gi] : _mm512_add_epi8(v[gi], bias);
                _mm512_store_si512(p.q + group * kPanelRows * 4, codes);
            }
            if constexpr (Tr::kSubs > 1) {
                _mm512_store_si512(p.scale + (b * Tr::kSubs + s) * kPanelRows, h.scale[s]);
            }
        });
        _mm512_store_ps(p.d + b * kPanelRows, h.d);
        if constexpr (Tr::kMin) {
            _mm512_store_ps(p.min_scale + b * kPanelRows, h.min_scale);
            if constexpr (Tr::kSubs > 1) {  // the K-quants' mins
                for (int j = 0; j < Tr::kSubs / 2; ++j) {
                    _mm512_store_si512(p.mins + (b * (Tr::kSubs / 2) + j) * kPanelRows, h.mins[j]);
                }
            }
        }
    }
}

#elif HWY_TARGET == HWY_AVX2

// The AVX-512 kernels' arithmetic in halves of 8 rows (packed_x86_avx2-inl.h), exactly: the same
// integer sums, then per row and token the same float operations in the same order, so a token's
// outputs have the same bits as from the AVX2 GEMM on the file's layout (gemm_simd.cpp).
//
// AVX2 has no vpdpbusd: vpmaddubsw multiplies the unsigned codes with the signed activations
// (|a| <= 128) in 16-bit pairs and vpmaddwd widens them. Codes of at most Tr::kMaxCode (15 for
// 4-bit codes, 31 for 5-bit, 63 for Q6_K's) keep a pair within 2 * kMaxCode * 128, so the pairs of
// several groups add in 16 bits before one widening (8 groups of 4-bit codes, 4 of 5-bit, 2 of
// 6-bit): exact, and fewer instructions than widening each. Codes of kOffset 128 (up to 255) would
// saturate: they go back to signed values (xor 0x80) and multiply as |w| x sign(a, w), a sum that
// needs no correction. The IQ4 types look their table indices up as the signed values and as
// their magnitudes, two vpshufb where the codes took a vpshufb, a vpxor and a vpabsb (one core,
// the matrix in L2: IQ4_NL 15.0 -> 16.8 GB/s, IQ4_XS 14.0 -> 15.3).
//
// One column group of signed values w (Q8_0: its codes ^ 0x80; IQ4: looked up from the indices)
// against 4 activations x4 (each 32-bit lane): |w| x sign(x4, w) in 16-bit pairs, widened to each
// row's sum.
HWY_INLINE __m256i SignedGroupDotAvx2(__m256i w, __m256i w_abs, __m256i x4) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(x4, w)),
                             _mm256_set1_epi16(1));
}

// A sub-block's OffsetCorrection (matmul_internal.h) for codes of offset kOffset, in every lane:
// a broadcast load and a shift, no general-purpose register on the way.
template <int kOffset>
HWY_INLINE __m256i OffsetCorrectionAvx2(const int32_t* corr) {
    static_assert(kOffset > 0 && kOffset <= 128 && (kOffset & (kOffset - 1)) == 0);
    constexpr int kShift = 7 - std::countr_zero(static_cast<unsigned>(kOffset));
    static_assert(OffsetCorrection(-128 * 37, kOffset) == (-128 * 37) >> kShift);
    const __m256i c =
        _mm256_castps_si256(_mm256_broadcast_ss(reinterpret_cast<const float*>(corr)));
    return _mm256_srai_epi32(c, kShift);
}

// dot[t] = the exact dot product of one sub-block's codes v (the IQ4 types: their table indices)
// with token t's activations (act: the sub-block's first group of token 0, groups W tokens apart;
// corr: token 0's correction), times `widen` where the pairs are widened (ones, or a K-quant
// sub-block's scale in both 16-bit halves of each lane: one vpmaddwd instead of a vpmulld on the
// sum; codes without an offset only).
template <class Tr, int T, int W>
HWY_INLINE void SubBlockDotsAvx2(const __m256i* v, const int8_t* act, const int32_t* corr,
                                 __m256i widen, __m256i (&dot)[T]) {
    constexpr int kGroups = Tr::kSub / 4;
    const __m256i ones = _mm256_set1_epi16(1);
    auto four = [&](int gi, int t) HWY_ATTR {
        int32_t bytes;
        std::memcpy(&bytes, act + (gi * W + t) * 4, 4);
        return _mm256_set1_epi32(bytes);
    };
    for (int t = 0; t < T; ++t) {
        // The codes are value + kOffset: start at -kOffset * sum(a).
        if constexpr (Tr::kOffset == 0 || Tr::kOffset == 128) {
            dot[t] = _mm256_setzero_si256();
        } else {
            dot[t] = OffsetCorrectionAvx2<Tr::kOffset>(corr + t);
        }
    }
    if constexpr (Tr::kOffset == 128) {
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
        const __m256i values = packed::Iq4Table(packed::Iq4Form::kSigned);  // IQ4 only
        const __m256i magnitudes = packed::Iq4Table(packed::Iq4Form::kMagnitude);
        for (int gi = 0; gi < kGroups; ++gi) {
            __m256i w, w_abs;
            if constexpr (packed::IsIndexed<Tr>()) {  // v: indices into the IQ4 table
                w = _mm256_shuffle_epi8(values, v[gi]);
                w_abs = _mm256_shuffle_epi8(magnitudes, v[gi]);
            } else {
                w = _mm256_xor_si256(v[gi], flip);
                w_abs = _mm256_abs_epi8(w);
            }
            for (int t = 0; t < T; ++t) {
                dot[t] = _mm256_add_epi32(dot[t], SignedGroupDotAvx2(w, w_abs, four(gi, t)));
            }
        }
    } else {
        constexpr int kPerSum = std::min(kGroups, 32767 / (2 * Tr::kMaxCode * 128));
        static_assert(kPerSum >= 1 && kGroups % kPerSum == 0);
        for (int g0 = 0; g0 < kGroups; g0 += kPerSum) {
            for (int t = 0; t < T; ++t) {
                // A tree of additions: a chain of 7 would hold each block's sum back.
                __m256i pairs[kPerSum];
                for (int i = 0; i < kPerSum; ++i) {
                    pairs[i] = _mm256_maddubs_epi16(v[g0 + i], four(g0 + i, t));
                }
                for (int n = kPerSum; n > 1; n /= 2) {
                    for (int i = 0; i < n / 2; ++i) {
                        pairs[i] = _mm256_add_epi16(pairs[2 * i], pairs[2 * i + 1]);
                    }
                }
                dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(pairs[0], widen));
            }
        }
    }
}

// Zen 3's hardware prefetchers alone let one core's kernel and its memory reads take turns: one
// thread decoded Q4_0 from DRAM at 61-66 % of a plain read of the same huge pages (10-13 GB/s
// against 17-20), what no overlap at all gives for a kernel that runs at 26 GB/s from L3. Asking
// for the lines 2048 bytes ahead as each sub-block starts (a block's share of them: a
// K-quant block's 36 lines spread over its 8 sub-blocks; all at once was 5-15 % slower on Zen 4)
// brought one thread to 88 % on Q4_0 and Q8_0 and 82 % on Q4_K, two to 97, 98 and 92 % (from 72,
// 78 and 77). Zen 4's prefetchers keep up alone, and there the prefetches only cost: on the Zen 4
// VM without AVX-512 (3 December, bench_kernels 4096 x 4096 from DRAM, one thread) Q4_0 read
// 19.5-20.4 GB/s with them and 23.8-24.1 without, Q4_K 14.0-15.4 against 21.5-22.3, and two
// threads decoded Llama 1.1B Q4_K_M at 40-45 tokens/s with them, 48-50 without (three
// alternations; Q4_0, Q8_0 and the MoE 5-15 % faster too). So kPrefetch follows
// software_prefetch_pays() (kernel_path.h), as in the AVX-512 kernels above.
// Sub-block s's share of them. Constants once the sub-block loop is unrolled: a few prefetches,
// no arithmetic.
template <class Tr, bool kPrefetch>
HWY_INLINE void PrefetchAhead(const uint8_t* codes, int64_t distance, int s) {
    PrefetchRange<kPrefetch>(codes, distance, s * Tr::kBlockBytes / Tr::kSubs,
                             (s + 1) * Tr::kBlockBytes / Tr::kSubs);
}

// The float operations of the panel kernels for a block with mins (Q4_K, Q5_K), per row of a
// half: isum its scaled sums, bsum[j * stride] the activations' sums of sub-blocks 2j, 2j + 1.
HWY_INLINE __m256 KMinBlockAvx2(const packed::KHead& head, __m256i isum, const int32_t* bsum,
                                int64_t stride, float da, __m256 acc) {
    __m256i msum = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
        msum = _mm256_add_epi32(
            msum, _mm256_madd_epi16(head.mins[j], _mm256_set1_epi32(bsum[j * stride])));
    }
    const __m256 block = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), head.min_scale,
                                         _mm256_mul_ps(_mm256_cvtepi32_ps(isum), head.d));
    return _mm256_fmadd_ps(block, _mm256_set1_ps(da), acc);
}

// One token (dense activations) against every block of a Q4_0, Q5_0 or Q8_0 chunk, into acc[h]
// (rows 8h .. 8h + 7): word by word for both halves, each activation broadcast once for the 16
// rows, the blocks' addresses in constant steps. The generic loop below decodes a half's 8 code
// vectors and takes 8 broadcasts at once, and GCC spilled what the second half needed (llvm-mca:
// 145 instructions a Q4_0 block). One core, the kernel alone on a 2048 x 2048 matrix in L3 (Zen 4
// without AVX-512, 2.6 GHz): Q4_0 16.2-16.7 -> 21.6-24.0 GB/s, Q5_0 11.1-11.8 -> 14.0-14.4,
// Q8_0 21.7-30.0 -> 29.7-32.5. (The K-quants' loop done so, both heads decoded first, was slower;
// Q4_K's, its scales taken per pair of sub-blocks, is faster: Q4KOneTokenAvx2.)
// The same integer sums (exact in any order) and the same float operations per block: the same
// bits.
template <class Tr, bool kPrefetch>
HWY_INLINE void Block32OneTokenAvx2(const PackedChunk& g, const IntActivations& a,
                                    __m256 (&acc)[2][1]) {
    constexpr int64_t kCodeBytes = Tr::kBlockBytes - 32, kPairBytes = 64 + 2 * kCodeBytes;
    assert(g.l.has_d_units && g.l.a_bytes == kCodeBytes && g.b0 % 2 == 0);
    const int8_t* act = a.q_tile(0) + g.b0 * 32;  // a block's 32 activations, W = 1
    const int32_t* corr = a.corr + g.b0;
    const float* da = a.d + g.b0;
    auto block = [&](const uint8_t* pa, const uint8_t* pd, int64_t local) HWY_ATTR {
        PrefetchAhead<Tr, kPrefetch>(pa, g.prefetch_bytes, 0);
        const int8_t* x = act + local * 32;
        auto four = [x](int group) HWY_ATTR {  // the activations of columns 4 group .. + 3
            int32_t bytes;
            std::memcpy(&bytes, x + 4 * group, 4);
            return _mm256_set1_epi32(bytes);
        };
        __m256i dot[2];  // per half
        if constexpr (Tr::kOffset == 128) {
            static_assert(std::is_same_v<Tr, packed::Q8_0>);  // word j: column group j
            const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
            dot[0] = dot[1] = _mm256_setzero_si256();
            for (int j = 0; j < 8; ++j) {
                const __m256i x4 = four(j);
                for (int h = 0; h < 2; ++h) {
                    const __m256i w = _mm256_xor_si256(packed::Word(pa, j, h), flip);
                    dot[h] = _mm256_add_epi32(dot[h],
                                              SignedGroupDotAvx2(w, _mm256_abs_epi8(w), x4));
                }
            }
        } else {
            // Word j: columns 4j .. 4j + 3 in its low nibbles, 16 + 4j .. in its high ones; Q5_0
            // adds the fifth bits of unit 4 (bit g: column group g).
            constexpr bool kFifthBit = std::is_same_v<Tr, packed::Q5_0>;
            static_assert(kFifthBit || std::is_same_v<Tr, packed::Q4_0>);
            auto codes = [pa](__m256i nibbles, int group, int h) HWY_ATTR {
                if constexpr (!kFifthBit) return nibbles;
                return packed::WithFifthBit(nibbles, packed::Word(pa, 4, h), group);
            };
            // The codes are value + kOffset: start at -kOffset * sum(a).
            dot[0] = dot[1] = OffsetCorrectionAvx2<Tr::kOffset>(corr + local);
            // Pairs of 4-bit codes add in 16 bits for all 8 groups, of 5-bit codes for 4 (at most
            // 2 * kMaxCode * 128 each).
            constexpr int kWordsPerSum = kFifthBit ? 2 : 4;
            for (int j0 = 0; j0 < 4; j0 += kWordsPerSum) {
                __m256i pairs[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
                for (int j = j0; j < j0 + kWordsPerSum; ++j) {
                    const __m256i low = four(j), high = four(4 + j);
                    for (int h = 0; h < 2; ++h) {
                        const __m256i w = packed::Word(pa, j, h);
                        pairs[h] = _mm256_add_epi16(
                            pairs[h],
                            _mm256_add_epi16(
                                _mm256_maddubs_epi16(codes(packed::Low4(w), j, h), low),
                                _mm256_maddubs_epi16(codes(packed::High4(w), 4 + j, h), high)));
                    }
                }
                for (int h = 0; h < 2; ++h) {
                    dot[h] = _mm256_add_epi32(dot[h],
                                              _mm256_madd_epi16(pairs[h], _mm256_set1_epi16(1)));
                }
            }
        }
        const __m256 scale = _mm256_set1_ps(da[local]);
        for (int h = 0; h < 2; ++h) {
            acc[h][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h]),
                                        _mm256_mul_ps(packed::DUnitScales(pd, h), scale), acc[h][0]);
        }
    };
    // Blocks in pairs behind their d unit: d unit, codes of 2p, codes of 2p + 1.
    const uint8_t* pair = g.codes(0) - 64;
    int64_t local = 0;
    for (; local + 2 <= g.n_blocks; local += 2, pair += kPairBytes) {
        block(pair + 64, pair, local);
        block(pair + 64 + kCodeBytes, pair + 32, local + 1);
    }
    if (local < g.n_blocks) block(pair + 64, pair, local);
}

// One token (dense activations) against every block of a Q4_K chunk, into acc[h] (rows 8h ..
// 8h + 7): sub-blocks in pairs, word by word for both halves. Word 4 + 8p + j holds column group
// j of sub-block 2p (low nibbles) and 2p + 1 (high ones), so each word is loaded once for both
// and each activation broadcast serves the 16 rows: 8 loads per sub-block and half where the
// generic loop below, a half at a time, takes 16 (its 816 instructions a block were bound by the
// two load ports and the four vector pipes alike). One core, the matrix in L2 (bench_kernels
// GemvPackedInCache, five alternations on the Zen 4 VM without AVX-512): 29.5 -> 32.7 GB/s; from
// DRAM, where this VM's memory is the limit, no change beyond the noise. The same integer sums
// and the same float operations per block as the generic loop: the same bits.
template <bool kPrefetch>
HWY_INLINE void Q4KOneTokenAvx2(const PackedChunk& g, const IntActivations& a,
                                __m256 (&acc)[2][1]) {
    const int8_t* act = a.q_tile(0) + g.b0 * 256;  // a block's 256 activations, W = 1
    const float* da = a.d + g.b0;
    const int32_t* bsum = a.bsum + g.b0 * 4;  // per pair of sub-blocks
    for (int64_t local = 0; local < g.n_blocks; ++local) {
        const uint8_t* pa = g.codes(local);
        const int8_t* x = act + local * 256;
        auto four = [x](int s, int group) HWY_ATTR {  // columns 4 group .. + 3 of sub-block s
            int32_t bytes;
            std::memcpy(&bytes, x + 32 * s + 4 * group, 4);
            return _mm256_set1_epi32(bytes);
        };
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        // Unrolled: the scales' pshufb patterns must be constants (built at run time, they took
        // the time the loads saved).
#pragma GCC unroll 4
        for (int pair = 0; pair < 4; ++pair) {
            // The pair's share of the block's 36 lines: 9.
            PrefetchRange<kPrefetch>(pa, g.prefetch_bytes, 576 * pair, 576 * (pair + 1));
            // 16-bit pair sums of sub-blocks 2 pair (low) and 2 pair + 1 (high) per half: 8 groups
            // of 4-bit codes stay within 8 * 2 * 15 * 128.
            __m256i low[2], high[2];
            for (int j = 0; j < 8; ++j) {
                const __m256i x_low = four(2 * pair, j), x_high = four(2 * pair + 1, j);
                for (int h = 0; h < 2; ++h) {
                    const __m256i w = packed::Word(pa, 4 + 8 * pair + j, h);
                    const __m256i l = _mm256_maddubs_epi16(packed::Low4(w), x_low);
                    const __m256i u = _mm256_maddubs_epi16(packed::High4(w), x_high);
                    low[h] = j == 0 ? l : _mm256_add_epi16(low[h], l);
                    high[h] = j == 0 ? u : _mm256_add_epi16(high[h], u);
                    // A chain per sum: GCC made trees of them that held all 32 products of a
                    // pair in registers and spilled them.
                    asm("" : "+x"(low[h]), "+x"(high[h]));
                }
            }
            for (int h = 0; h < 2; ++h) {
                // The 6-bit scales of sub-blocks 0-3 or 4-7 (as DecodeK4Head), byte k of each
                // word for sub-block 4 (pair / 2) + k.
                const __m256i s0 = packed::Word(pa, 1, h);
                const __m256i scales = pair < 2 ? packed::K4Scales03(s0)
                                                : packed::K4Scales47(s0, packed::Word(pa, 3, h));
                const int k = 2 * pair % 4;
                const __m256i scaled_low = _mm256_madd_epi16(
                    low[h], _mm256_shuffle_epi8(scales, packed::ByteToBothHalves(k)));
                const __m256i scaled_high = _mm256_madd_epi16(
                    high[h], _mm256_shuffle_epi8(scales, packed::ByteToBothHalves(k + 1)));
                isum[h] = _mm256_add_epi32(isum[h], _mm256_add_epi32(scaled_low, scaled_high));
            }
        }
        for (int h = 0; h < 2; ++h) {
            // Of the head only d, dmin and the mins are used: the compiler drops the rest.
            acc[h][0] = KMinBlockAvx2(packed::DecodeK4Head(pa, h), isum[h], bsum + local * 4, 1,
                                      da[local], acc[h][0]);
        }
    }
}

// T tokens (slot `slot` of activation tile `tile` and the next T - 1, tiles of W) against every
// block of one chunk, into acc[i][t] for the halves h0 .. h0 + kHalves - 1 (8 rows each). With
// both halves a block's units are read once, front to back; a run of 4 tokens takes one half at a
// time (two halves' accumulators would not fit the 16 registers), the second from L1 or L2.
template <class Tr, bool kPrefetch, int T, int W, int kHalves>
HWY_INLINE void PackedBlocksAvx2(const PackedChunk& g, const IntActivations& a, int64_t tile,
                                 int slot, int h0, __m256 (&acc)[kHalves][T]) {
    constexpr bool kOneTokenByWords = std::is_same_v<Tr, packed::Q4_0> ||
                                      std::is_same_v<Tr, packed::Q5_0> ||
                                      std::is_same_v<Tr, packed::Q8_0>;
    if constexpr (kOneTokenByWords && T == 1 && W == 1 && kHalves == 2) {
        Block32OneTokenAvx2<Tr, kPrefetch>(g, a, acc);
        return;
    }
    if constexpr (std::is_same_v<Tr, packed::Q4_K> && T == 1 && W == 1 && kHalves == 2) {
        Q4KOneTokenAvx2<kPrefetch>(g, a, acc);
        return;
    }
    constexpr int kGroups = Tr::kSub / 4;
    const int8_t* act = a.q_tile(tile) + slot * 4;
    const int32_t* corr = a.corr + a.sub_tile(tile) + slot;
    const float* da = a.d + a.block_tile(tile) + slot;
    const int32_t* bsum = Tr::kMin && Tr::kSubs > 1 ? a.bsum + a.pair_tile(tile) + slot : nullptr;
    const float* sum = Tr::kMin && Tr::kSubs == 1 ? a.sum + a.block_tile(tile) + slot : nullptr;
    for (int64_t local = 0; local < g.n_blocks; ++local) {
        const int64_t b = g.b0 + local;  // of the row: the activations' block
        const uint8_t* pa = g.codes(local);
        const uint8_t* pd = g.d(local);
        for (int i = 0; i < kHalves; ++i) {
            const int h = h0 + i;
            // The second half loads the activations again where GCC would otherwise keep the
            // first half's 4-byte values for it, spilled to the stack and reloaded: slower than
            // the broadcast loads from L1 (one core, the kernel alone on an L2-resident matrix:
            // Q4_K 26.7 -> 30.6 GB/s, Q5_K 19.5 -> 21.1, Q6_K 24.0 -> 25.1; Q5_0 16.9 -> 18.6;
            // Q4_0 and Q8_0 are faster without, 26.1 against 23.8 for Q4_0; all on one token,
            // which Q4_0, Q5_0, Q8_0 and Q4_K now take by their own loops above).
            constexpr bool kReloadPerHalf = Tr::kSubs > 1 || Tr::kOffset == 16;  // K-quants, Q5_0
            if (kReloadPerHalf && i > 0) asm volatile("" ::: "memory");
            const typename Tr::Head head = Tr::Decode(pa, pd, h);
            __m256i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
            auto for_each_sub = [&](auto&& f) HWY_ATTR {
                if constexpr (packed::IsIndexed<Tr>()) {
                    Tr::ForEachIndexSub(pa, head, h, f);
                } else {
                    Tr::ForEachSub(pa, head, h, f);
                }
            };
            for_each_sub([&](int s, const __m256i* v) HWY_ATTR {
                if (h == 0) PrefetchAhead<Tr, kPrefetch>(pa, g.prefetch_bytes, s);
                const int64_t as = b * Tr::kSubs + s;  // sub-block of the activation row
                // Q4_K and Q5_K scale the pairs as they widen them (no offset to correct).
                constexpr bool kScaledPairs = Tr::kSubs > 1 && Tr::kOffset == 0;
                __m256i widen = _mm256_set1_epi16(1);
                if constexpr (kScaledPairs) widen = head.scale_pairs[s];
                __m256i dot[T];
                SubBlockDotsAvx2<Tr, T, W>(v, act + as * kGroups * W * 4, corr + as * W, widen,
                                           dot);
                for (int t = 0; t < T; ++t) {
                    if constexpr (Tr::kSubs == 1) {
                        isum[t] = dot[t];
                    } else if constexpr (kScaledPairs) {
                        isum[t] = _mm256_add_epi32(isum[t], dot[t]);
                    } else {
                        isum[t] = _mm256_add_epi32(
                            isum[t], _mm256_mullo_epi32(dot[t], Tr::Scale(head, pa, h, s)));
                    }
                }
            });
            // The float operations of the panel kernels, per row and token.
            if constexpr (Tr::kSubs == 1 || !Tr::kMin) {
                for (int t = 0; t < T; ++t) {
                    const __m256 sd = _mm256_mul_ps(head.d, _mm256_set1_ps(da[b * W + t]));
                    acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), sd, acc[i][t]);
                }
                if constexpr (Tr::kMin) {  // Q4_1, Q5_1: + m * s_a
                    for (int t = 0; t < T; ++t) {
                        acc[i][t] = _mm256_fmadd_ps(head.min_scale, _mm256_set1_ps(sum[b * W + t]),
                                                    acc[i][t]);
                    }
                }
            } else {
                for (int t = 0; t < T; ++t) {
                    acc[i][t] = KMinBlockAvx2(head, isum[t], bsum + b * (Tr::kSubs / 2) * W + t, W,
                                              da[b * W + t], acc[i][t]);
                }
            }
        }
    }
}

// T tokens from token t0 (tiles of W) against one chunk, halves h0 .. h0 + kHalves - 1, stored to
// y[(t0 + t) * y_stride + r] for the group's valid rows. A chunk after a row's first continues the
// sums the previous one stored (as the AVX-512 PackedTile).
template <class Tr, bool kPrefetch, int T, int W, int kHalves>
void PackedTileAvx2(const PackedChunk& g, const IntActivations& a, int64_t t0, float* y,
                    int64_t y_stride, int valid_rows, int h0) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i rows[kHalves];
    __m256 acc[kHalves][T];
    for (int i = 0; i < kHalves; ++i) {
        const int r0 = 8 * (h0 + i);
        rows[i] = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid_rows - r0), lane);
        for (int t = 0; t < T; ++t) {
            acc[i][t] = g.b0 == 0 ? _mm256_setzero_ps()
                                  : _mm256_maskload_ps(y + (t0 + t) * y_stride + r0, rows[i]);
        }
    }
    PackedBlocksAvx2<Tr, kPrefetch, T, W, kHalves>(g, a, t0 / W, static_cast<int>(t0 % W), h0, acc);
    for (int i = 0; i < kHalves; ++i) {
        for (int t = 0; t < T; ++t) {
            _mm256_maskstore_ps(y + (t0 + t) * y_stride + 8 * (h0 + i), rows[i], acc[i][t]);
        }
    }
}

// Groups [g0, g1): runs of 4 (a half at a time), 2 and 1 tokens against each chunk.
template <class Tr, bool kPrefetch>
void PackedGroupsAvx2(const WeightMatrix& w, const PackedLayout& l, int64_t g0, int64_t g1,
                      const IntActivations& a, int64_t n_tokens, float* y) {
    ForEachChunk(w, l, g0, g1, y, [&](const PackedChunk& g, float* yg, int valid) HWY_ATTR {
        if (a.width == 1) {  // one token, dense activations
            PackedTileAvx2<Tr, kPrefetch, 1, 1, 2>(g, a, 0, yg, w.n_rows, valid, 0);
            return;
        }
        int64_t t = 0;
        for (; t + 4 <= n_tokens; t += 4) {
            PackedTileAvx2<Tr, kPrefetch, 4, kTokenTile, 1>(g, a, t, yg, w.n_rows, valid, 0);
            PackedTileAvx2<Tr, kPrefetch, 4, kTokenTile, 1>(g, a, t, yg, w.n_rows, valid, 1);
        }
        if (t + 2 <= n_tokens) {
            PackedTileAvx2<Tr, kPrefetch, 2, kTokenTile, 2>(g, a, t, yg, w.n_rows, valid, 0);
            t += 2;
        }
        if (t < n_tokens) {
            PackedTileAvx2<Tr, kPrefetch, 1, kTokenTile, 2>(g, a, t, yg, w.n_rows, valid, 0);
        }
    });
}

// One chunk decoded into its blocks of a GEMM panel, half by half, exactly as the AVX-512
// FillPanel (codes + 128 - kOffset, the panel's scales).
template <class Tr>
void FillPanelAvx2(const PackedChunk& g, const IntPanel& panel) {
    constexpr int kGroups = Tr::kSub / 4;
    const IntPanel p = panel;  // local: the stores would make the compiler reload its fields
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(128 - Tr::kOffset));
    auto store = [](auto* to, __m256i v)
                     HWY_ATTR { _mm256_store_si256(reinterpret_cast<__m256i*>(to), v); };
    for (int64_t local = 0; local < g.n_blocks; ++local) {
        const int64_t b = g.b0 + local;  // of the row: the panel's block
        const uint8_t* pa = g.codes(local);
        for (int h = 0; h < 2; ++h) {
            const typename Tr::Head head = Tr::Decode(pa, g.d(local), h);
            Tr::ForEachSub(pa, head, h, [&](int s, const __m256i* v) HWY_ATTR {
                for (int gi = 0; gi < kGroups; ++gi) {
                    const int64_t group = b * (Tr::kBlockValues / 4) + s * kGroups + gi;
                    store(p.q + group * kPanelRows * 4 + 32 * h,
                          Tr::kOffset == 128 ? v[gi] : _mm256_add_epi8(v[gi], bias));
                }
                if constexpr (Tr::kSubs > 1) {
                    store(p.scale + (b * Tr::kSubs + s) * kPanelRows + 8 * h,
                          Tr::Scale(head, pa, h, s));
                }
            });
            _mm256_store_ps(p.d + b * kPanelRows + 8 * h, head.d);
            if constexpr (Tr::kMin) {
                _mm256_store_ps(p.min_scale + b * kPanelRows + 8 * h, head.min_scale);
                if constexpr (Tr::kSubs > 1) {  // the K-quants' mins
                    for (int j = 0; j < Tr::kSubs / 2; ++j) {
                        store(p.mins + (b * (Tr::kSubs / 2) + j) * kPanelRows + 8 * h,
                              head.mins[j]);
                    }
                }
            }
        }
    }
}

#elif defined(MINFER_PACKED_ARM_NEON)

// aarch64: a chunk's blocks are decoded a few at a time (packed_arm_neon-inl.h) into a small panel,
// as the portable filling (gemm_panels.cpp) unpacks the file's layout, which the panel kernels
// (gemm_arm_neon-inl.h: sdot, usmmla, usdot, or the portable loops) then multiply with every
// token: the same panels, the same arithmetic, so the same bits as from the file's layout. The
// weights stream in as one sequential run per band and need no transposition; the panel of at
// most 256 columns stays in L1.

// Blocks [local0, local0 + nb) of a chunk into blocks [panel_b0, panel_b0 + nb) of the panel:
// codes + 128 - kOffset, d, and the sub-block scales, -dmin and mins where the type has them.
template <class Tr>
void FillPanelNeon(const PackedChunk& g, int64_t local0, int64_t nb, const IntPanel& panel,
                   int64_t panel_b0) {
    constexpr int kGroups = Tr::kSub / 4;
    const IntPanel p = panel;  // local: the stores would make the compiler reload its fields
    const uint8x16_t bias = vdupq_n_u8(static_cast<uint8_t>(128 - Tr::kOffset));
    for (int64_t i = 0; i < nb; ++i) {
        const int64_t b = panel_b0 + i;
        const uint8_t* pa = g.codes(local0 + i);
        const uint8_t* pd = g.d(local0 + i);
        for (int q = 0; q < 4; ++q) {
            const typename Tr::Head head = Tr::Decode(pa, pd, q);
            Tr::ForEachSub(pa, head, q, [&](int s, const uint8x16_t* v) HWY_ATTR {
                for (int gi = 0; gi < kGroups; ++gi) {
                    const int64_t group = b * (Tr::kBlockValues / 4) + s * kGroups + gi;
                    vst1q_u8(p.q + group * kPanelRows * 4 + 16 * q,
                             Tr::kOffset == 128 ? v[gi] : vaddq_u8(v[gi], bias));
                }
                if constexpr (Tr::kSubs > 1) {
                    vst1q_s32(p.scale + (b * Tr::kSubs + s) * kPanelRows + 4 * q,
                              Tr::Scale(head, pa, q, s));
                }
            });
            vst1q_f32(p.d + b * kPanelRows + 4 * q, head.d);
            if constexpr (Tr::kMin) {
                vst1q_f32(p.min_scale + b * kPanelRows + 4 * q, head.min_scale);
                if constexpr (Tr::kSubs > 1) {  // the K-quants' mins
                    for (int j = 0; j < Tr::kSubs / 2; ++j) {
                        vst1q_s32(p.mins + (b * (Tr::kSubs / 2) + j) * kPanelRows + 4 * q,
                                  head.mins[j]);
                    }
                }
            }
        }
    }
}

// Groups [g0, g1) against every token: chunk by chunk (stripe by stripe), 8 blocks of 32 values
// or one of 256 at a time through a panel of 256 columns on the stack.
template <class Tr>
void PackedGroupsNeon(const WeightMatrix& w, const PackedLayout& l, int64_t g0, int64_t g1,
                      const IntActivations& a, int64_t n_tokens, float* y) {
    constexpr int64_t kPanelBlocks = 256 / Tr::kBlockValues;
    alignas(64) std::byte memory[8192];
    assert(int_panel_bytes(w.type, 256) <= sizeof(memory));
    ForEachChunk(w, l, g0, g1, y, [&](const PackedChunk& g, float* yg, int valid) HWY_ATTR {
        for (int64_t local = 0; local < g.n_blocks; local += kPanelBlocks) {
            const int64_t nb = std::min(kPanelBlocks, g.n_blocks - local);
            const IntPanel panel = int_panel_at(memory, w.type, nb * Tr::kBlockValues);
            FillPanelNeon<Tr>(g, local, nb, panel, 0);
            const int64_t b = g.b0 + local;  // of the row
            gemm_int_panel_simd(panel, a, b, n_tokens, yg, w.n_rows, valid, b > 0);
        }
    });
}

#endif  // HWY_TARGET == HWY_AVX3, HWY_AVX2, aarch64's NEON

#ifdef MINFER_PACKED_KERNELS

// Calls f(traits) for the type (false: no packed kernels for it).
template <class F>
bool WithTraits(GgmlType type, F&& f) {
    switch (type) {
        case GgmlType::Q4_0:
            return f(packed::Q4_0{}), true;
        case GgmlType::Q4_1:
            return f(packed::Q4_1{}), true;
        case GgmlType::Q5_0:
            return f(packed::Q5_0{}), true;
        case GgmlType::Q5_1:
            return f(packed::Q5_1{}), true;
        case GgmlType::Q8_0:
            return f(packed::Q8_0{}), true;
        case GgmlType::IQ4_NL:
            return f(packed::Iq4Nl{}), true;
        case GgmlType::Q4_K:
            return f(packed::Q4_K{}), true;
        case GgmlType::Q5_K:
            return f(packed::Q5_K{}), true;
        case GgmlType::Q6_K:
            return f(packed::Q6_K{}), true;
        case GgmlType::IQ4_XS:
            return f(packed::Iq4Xs{}), true;
        default:
            return false;
    }
}

bool PackedAvailable(GgmlType type) {
    // Float weights: packed_float_simd.cpp.
    return WithTraits(type, [](auto) HWY_ATTR {}) || type == GgmlType::F32 ||
           type == GgmlType::F16 || type == GgmlType::BF16;
}

void PackedMatmul(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                  const IntActivations& a, int64_t n_tokens, float* y) {
    const PackedLayout l = packed_layout(w.type, w.n_cols, w.n_rows);
    WithTraits(w.type, [&](auto traits) HWY_ATTR {
        using Tr = decltype(traits);
#if defined(MINFER_PACKED_ARM_NEON)
        PackedGroupsNeon<Tr>(w, l, group_begin, group_end, a, n_tokens, y);
#elif HWY_TARGET == HWY_AVX3
        const bool prefetch = x86_software_prefetch();
        if (x86_vnni_available()) {
            if (prefetch) {
                PackedGroups<Tr, true, true>(w, l, group_begin, group_end, a, n_tokens, y);
            } else {
                PackedGroups<Tr, true, false>(w, l, group_begin, group_end, a, n_tokens, y);
            }
        } else if (prefetch) {
            PackedGroups<Tr, false, true>(w, l, group_begin, group_end, a, n_tokens, y);
        } else {
            PackedGroups<Tr, false, false>(w, l, group_begin, group_end, a, n_tokens, y);
        }
#else
        if (x86_software_prefetch()) {
            PackedGroupsAvx2<Tr, true>(w, l, group_begin, group_end, a, n_tokens, y);
        } else {
            PackedGroupsAvx2<Tr, false>(w, l, group_begin, group_end, a, n_tokens, y);
        }
#endif
    });
}

void FillIntPanelPacked(const WeightMatrix& w, int64_t group, const IntPanel& panel) {
    const PackedLayout l = packed_layout(w.type, w.n_cols, w.n_rows);
    WithTraits(w.type, [&](auto traits) HWY_ATTR {
        for (int64_t k = 0; k < l.n_stripes(); ++k) {
#if defined(MINFER_PACKED_ARM_NEON)
            const PackedChunk chunk = ChunkAt(w, l, group, k);
            FillPanelNeon<decltype(traits)>(chunk, 0, chunk.n_blocks, panel, chunk.b0);
#elif HWY_TARGET == HWY_AVX3
            FillPanel<decltype(traits)>(ChunkAt(w, l, group, k), panel);
#else
            FillPanelAvx2<decltype(traits)>(ChunkAt(w, l, group, k), panel);
#endif
        }
    });
}

#else  // no packed kernels for this target

bool PackedAvailable(GgmlType) {
    return false;
}
void PackedMatmul(const WeightMatrix&, int64_t, int64_t, const IntActivations&, int64_t, float*) {}
void FillIntPanelPacked(const WeightMatrix&, int64_t, const IntPanel&) {}

#endif  // MINFER_PACKED_KERNELS

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(PackedAvailable);
HWY_EXPORT(PackedMatmul);
HWY_EXPORT(FillIntPanelPacked);

bool packed_kernels_available(GgmlType type) {
    return kernel_path() == KernelPath::kBest && HWY_DYNAMIC_DISPATCH(PackedAvailable)(type);
}

void packed_matmul_simd(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                        const IntActivations& act, int64_t n_tokens, float* y) {
    HWY_DYNAMIC_DISPATCH(PackedMatmul)(w, group_begin, group_end, act, n_tokens, y);
}

void fill_int_panel_packed_simd(const WeightMatrix& w, int64_t group, const IntPanel& panel) {
    HWY_DYNAMIC_DISPATCH(FillIntPanelPacked)(w, group, panel);
}

}  // namespace minfer::kernels
#endif
