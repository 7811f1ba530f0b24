// Highway implementation of attention.h; compiled once per SIMD target.
// SVE's vectors are sizeless and cannot be array elements, which these kernels' accumulators
// are: on aarch64 they run on NEON (128-bit) also where the CPU has SVE.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include <hwy/cache_control.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/ggml_exp-inl.h"  // per-target: after highway.h
#include "kernels/ops.h"

HWY_BEFORE_NAMESPACE();
namespace minfer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DH = hn::Rebind<hwy::float16_t, DF>;
using VF = hn::Vec<DF>;
constexpr int64_t kTile = kAttentionKeyTile;

// The paged cache's tiles (1-4 KiB each) of one head follow each other in the CPU backend's pool
// where a sequence's blocks do (backend/cpu/kv_pool.h), but blocks may lie anywhere, and the
// hardware prefetchers alone left a long context's reads waiting: scoring a tile asks for the lines
// of the one kPrefetchTiles ahead (Qwen2 0.5B at depth 4096, 2 vCPUs of an Intel Xeon: the
// attention op 222-239 us a layer without, 168-175 with; 2, 6 and 12 tiles ahead measured alike).
// The asks are spread through the score loop, a line per 64 bytes of dimensions, rather than issued
// in a burst before it (Zen 5, bench_kernels' AttendGroup/4096/256 from DRAM, 3 alternated rounds:
// 80-91 -> 56-78 us; tg128 at depth 4096 over depth 0, alternated: 0.75 -> 0.84).
constexpr int64_t kPrefetchTiles = 12;

// N cache values at p (f16 or f32) as f32.
HWY_INLINE VF LoadCache(const void* p, int64_t i, bool f16) {
    const DF df;
    if (f16) return hn::PromoteTo(df, hn::LoadU(DH(), static_cast<const hwy::float16_t*>(p) + i));
    return hn::LoadU(df, static_cast<const float*>(p) + i);
}

float LoadCacheScalar(const void* p, int64_t i, bool f16) {
    if (!f16) return static_cast<const float*>(p)[i];
    const hn::CappedTag<float, 1> d1;
    return hn::GetLane(hn::PromoteTo(d1, hn::LoadU(hn::Rebind<hwy::float16_t, decltype(d1)>(),
                                                   static_cast<const hwy::float16_t*>(p) + i)));
}

// x rounded to f16 and back (round to nearest even), in place.
void RoundToF16(float* x, int64_t n) {
    const DF df;
    const DH dh;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes)
        hn::StoreU(hn::PromoteTo(df, hn::DemoteTo(dh, hn::LoadU(df, x + i))), df, x + i);
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
    for (; i < n; ++i)
        hn::StoreU(hn::PromoteTo(d1, hn::DemoteTo(h1, hn::LoadU(d1, x + i))), d1, x + i);
}

// Scores of MC query rows against NT tiles of 16 keys (tiles[i] the keys 16 i .. 16 i + 15 of
// scores): scores[m][0..16 NT) = scale * q[m] . k. Each key's sum runs over d in order, one
// multiply-add after the other: with one tile of AVX-512 lanes that is 7 chains for Qwen2 0.5B's 7
// query rows, which the multiply-add's latency paces; two tiles at once give 14 chains the two FMA
// pipes can fill (bench_kernels' AttendGroup, one core, best of 8, Zen 5: 4096 keys in L2
// 45.0-46.6 -> 42.4-44.1 us, 256 keys 2.95-2.97 -> 2.81-2.88).
template <int MC, int NT>
void ScoreTiles(const float* q, int64_t dk, const void* const* tiles, const void* const* ahead,
                bool f16, float scale, float* scores, int64_t score_stride) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const int64_t row_bytes = kTile * (f16 ? 2 : 4);  // one dimension of a tile's 16 keys
    for (int64_t s = 0; s < kTile; s += lanes) {
        VF acc[NT][MC];
        for (int i = 0; i < NT; ++i)
            for (int j = 0; j < MC; ++j) acc[i][j] = hn::Zero(df);
        for (int64_t d = 0; d < dk; ++d) {
            if (s == 0 && d * row_bytes % 64 == 0) {  // the tiles ahead: a line at a time
                for (int i = 0; i < NT; ++i) {
                    if (ahead[i] != nullptr)
                        hwy::Prefetch(static_cast<const char*>(ahead[i]) + d * row_bytes);
                }
            }
            for (int i = 0; i < NT; ++i) {
                const VF k = LoadCache(tiles[i], d * kTile + s, f16);
                for (int j = 0; j < MC; ++j)
                    acc[i][j] = hn::MulAdd(hn::Set(df, q[j * dk + d]), k, acc[i][j]);
            }
        }
        for (int i = 0; i < NT; ++i)
            for (int j = 0; j < MC; ++j)
                hn::StoreU(hn::Mul(acc[i][j], hn::Set(df, scale)), df,
                           scores + j * score_stride + i * kTile + s);
    }
}

// out[m][d0 .. d0 + DC*lanes) = sum over keys of p[m][key] * v[key][...] for MC query rows, the
// keys read tile by tile (v_tiles[key / 16] holds rows of 16 keys). One flat loop over the keys:
// with a loop per tile inside a loop over the tiles GCC kept the accumulators in registers but
// also stored all of them to the stack after every key (7 query rows x 2 vectors: 14 stores a
// key, half this kernel's cycles at a 4096-key context).
template <int MC, int DC, bool kF16>
void WeighValues(const float* p, int64_t p_stride, int64_t n_keys, const void* const* v_tiles,
                 int64_t dv, int64_t d0, float* out, int64_t out_stride) {
    using Elem = std::conditional_t<kF16, hwy::float16_t, float>;
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const int64_t n_tiles = (n_keys + kTile - 1) / kTile;
    VF acc[MC][DC];
    for (int j = 0; j < MC; ++j)
        for (int c = 0; c < DC; ++c) acc[j][c] = hn::Zero(df);
    const Elem* v = nullptr;
    const char* ahead = nullptr;  // the tile kPrefetchTiles on, on the first pass (from memory)
    const auto row_bytes = static_cast<int64_t>(dv * sizeof(Elem));
    for (int64_t key = 0; key < n_keys; ++key) {
        const int64_t lane = key % kTile;
        if (lane == 0) {
            const int64_t tile = key / kTile;
            v = static_cast<const Elem*>(v_tiles[tile]) + d0;
            ahead = d0 == 0 && tile + kPrefetchTiles < n_tiles
                        ? static_cast<const char*>(v_tiles[tile + kPrefetchTiles])
                        : nullptr;
        }
        if (ahead != nullptr) {  // that tile's row of the same key: a line or two at a time
            for (int64_t at = 0; at < row_bytes; at += 64) {
                hwy::Prefetch(ahead + lane * row_bytes + at);
            }
        }
        VF row[DC];
        for (int c = 0; c < DC; ++c) row[c] = LoadCache(v, lane * dv + c * lanes, kF16);
        for (int j = 0; j < MC; ++j) {
            const VF w = hn::Set(df, p[j * p_stride + key]);
            for (int c = 0; c < DC; ++c) acc[j][c] = hn::MulAdd(w, row[c], acc[j][c]);
        }
    }
    for (int j = 0; j < MC; ++j)
        for (int c = 0; c < DC; ++c)
            hn::StoreU(acc[j][c], df, out + j * out_stride + d0 + c * lanes);
}

// Up to 8 query rows share each load (and f16 conversion) of V, 4 vectors of dimensions a pass
// for up to 4 rows, and up to 7 where 32 vector registers hold the 28 accumulators with a row
// vector and a broadcast (AVX-512, aarch64), else 2. A head of 64 dimensions with AVX-512 is
// then one pass over V instead of two: Qwen2 0.5B at depth 4096 (7 query rows a KV head, 2 vCPUs
// of an Intel Xeon) took 140-146 us a layer for the op instead of 154, and tg128 at depth 4096
// 0.79 (0.78-0.81) of depth 0 (was 0.77). The op is bound by how many lines one core has in
// flight: its prefetches wait for fill buffers (perf), and asking for V's first lines during the
// softmax, or K's further ahead or into L2 only, changed nothing beyond the noise.
template <int MC>
void WeighValuesRows(const float* p, int64_t p_stride, int64_t n_keys, const void* const* v,
                     int64_t dv, bool f16, float* out, int64_t out_stride) {
    constexpr bool k32Registers = HWY_ARCH_X86 ? HWY_TARGET <= HWY_AVX3 : HWY_ARCH_ARM_A64;
    constexpr int kWide = MC <= 4 || (k32Registers && MC <= 7) ? 4 : 2;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
    int64_t d0 = 0;
    for (; d0 + kWide * lanes <= dv; d0 += kWide * lanes) {
        if (f16) {
            WeighValues<MC, kWide, true>(p, p_stride, n_keys, v, dv, d0, out, out_stride);
        } else {
            WeighValues<MC, kWide, false>(p, p_stride, n_keys, v, dv, d0, out, out_stride);
        }
    }
    for (; d0 + lanes <= dv; d0 += lanes) {
        if (f16) {
            WeighValues<MC, 1, true>(p, p_stride, n_keys, v, dv, d0, out, out_stride);
        } else {
            WeighValues<MC, 1, false>(p, p_stride, n_keys, v, dv, d0, out, out_stride);
        }
    }
    for (; d0 < dv; ++d0) {  // dimensions beyond whole vectors
        for (int j = 0; j < MC; ++j) {
            float sum = 0.0f;
            for (int64_t key = 0; key < n_keys; ++key)
                sum += p[j * p_stride + key] *
                       LoadCacheScalar(v[key / kTile], (key % kTile) * dv + d0, f16);
            out[j * out_stride + d0] = sum;
        }
    }
}

// Kernel<MC>::run(m, args...) with MC = count (1 to 8).
template <template <int> class Kernel, int MC = 8, class... Args>
void RunRowGroup(int64_t count, int64_t m, Args... args) {
    if constexpr (MC > 1) {
        if (count < MC) return RunRowGroup<Kernel, MC - 1>(count, m, args...);
    }
    Kernel<MC>::run(m, args...);
}

// Rows in groups of up to 8: one pass over the keys per group of rows (a query head group of 7
// or 8, as in Qwen2 0.5B and Llama 1.1B, used to take passes of 4, 2 and 1).
template <template <int> class Kernel, class... Args>
void ForRowGroups(int64_t rows, Args... args) {
    for (int64_t m = 0; m < rows; m += 8)
        RunRowGroup<Kernel>(std::min<int64_t>(rows - m, 8), m, args...);
}

template <int MC>
struct ScoreRows {
    static void run(int64_t m, const float* q, int64_t dk, const void* const* tiles,
                    const void* const* ahead, int n_tiles, bool f16, float scale, float* out,
                    int64_t stride) {
        // The first group of rows asks for the tiles ahead; the others find them in cache.
        static constexpr const void* kNone[2] = {nullptr, nullptr};
        if (m > 0) ahead = kNone;
        // Two tiles where the accumulators fit the registers (8 rows: 16 of AVX-512's 32).
        constexpr bool kPairs = HWY_ARCH_X86 ? HWY_TARGET <= HWY_AVX3 : HWY_ARCH_ARM_A64;
        if constexpr (kPairs) {
            if (n_tiles == 2) {
                return ScoreTiles<MC, 2>(q + m * dk, dk, tiles, ahead, f16, scale, out + m * stride,
                                         stride);
            }
        }
        for (int i = 0; i < n_tiles; ++i) {
            ScoreTiles<MC, 1>(q + m * dk, dk, tiles + i, ahead + i, f16, scale,
                              out + m * stride + i * kTile, stride);
        }
    }
};

template <int MC>
struct WeighRows {
    static void run(int64_t m, const float* p, int64_t stride, int64_t n_keys, const void* const* v,
                    int64_t dv, bool f16, float* out, int64_t out_stride) {
        WeighValuesRows<MC>(p + m * stride, stride, n_keys, v, dv, f16, out + m * out_stride,
                            out_stride);
    }
};

// ggml's softmax works in vectors of 16 (its AVX-512 build), whatever our vector width.
constexpr int64_t kSoftmaxChunk = 16;

// Softmax of s[n] in place, as ggml computes it: whole chunks of 16 through GgmlExp, the rest
// through expf (taken in double and rounded, which is what glibc's expf returns), the sum in
// double over float sums of the chunks, one multiply by the float reciprocal. With round_to_f16
// the probabilities end rounded to f16 (ggml weighs V with them converted to V's type).
void Softmax(float* s, int64_t n, bool round_to_f16) {
    const DF df;
    const DH dh;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    float max = -INFINITY;
    int64_t i = 0;
    {
        auto vmax = hn::Set(df, -INFINITY);
        for (; i + lanes <= n; i += lanes) vmax = hn::Max(vmax, hn::LoadU(df, s + i));
        max = hn::GetLane(hn::MaxOfLanes(df, vmax));
        for (; i < n; ++i) max = std::max(max, s[i]);
    }
    const hn::CappedTag<float, kSoftmaxChunk> dc;  // vectors that tile a chunk
    const int64_t chunk_lanes = static_cast<int64_t>(hn::Lanes(dc));
    const auto vmax = hn::Set(dc, max);
    double sum = 0.0;
    for (i = 0; i + kSoftmaxChunk <= n; i += kSoftmaxChunk) {
        auto chunk_sum = hn::Zero(dc);
        for (int64_t k = i; k < i + kSoftmaxChunk; k += chunk_lanes) {
            const auto e = kernels::HWY_NAMESPACE::GgmlExp(dc, hn::Sub(hn::LoadU(dc, s + k), vmax));
            hn::StoreU(e, dc, s + k);
            chunk_sum = hn::Add(chunk_sum, e);
        }
        sum += static_cast<double>(hn::GetLane(hn::SumOfLanes(dc, chunk_sum)));
    }
    for (; i < n; ++i) {
        s[i] = static_cast<float>(std::exp(static_cast<double>(s[i] - max)));
        sum += s[i];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (i = 0; i + lanes <= n; i += lanes) {
        auto p = hn::Mul(hn::LoadU(df, s + i), hn::Set(df, inv));
        if (round_to_f16) p = hn::PromoteTo(df, hn::DemoteTo(dh, p));
        hn::StoreU(p, df, s + i);
    }
    const int64_t tail = i;
    for (; i < n; ++i) s[i] *= inv;
    if (round_to_f16) RoundToF16(s + tail, n - tail);
}

void SoftmaxRow(float* s, int64_t n) {
    Softmax(s, n, false);
}

void AttendGroup(const AttentionGroup& a, float* scratch) {
    const int64_t dk = a.head_dim_k, dv = a.head_dim_v, g = a.group, n = a.n_keys;
    const int64_t n_tiles = (n + kTile - 1) / kTile;
    const int64_t stride = n_tiles * kTile;  // a row of scores, padded to whole tiles
    float* q = scratch;                      // [g][dk]
    float* scores = q + g * dk;              // [g][stride]
    for (int64_t m = 0; m < g; ++m) {
        std::copy(a.q + m * a.q_stride, a.q + m * a.q_stride + dk, q + m * dk);
        if (a.f16) RoundToF16(q + m * dk, dk);
    }
    for (int64_t t = 0; t < n_tiles; t += 2) {
        const int pair = t + 1 < n_tiles ? 2 : 1;
        const void* ahead[2] = {nullptr, nullptr};  // the tiles kPrefetchTiles on
        for (int i = 0; i < pair; ++i) {
            if (t + i + kPrefetchTiles < n_tiles) ahead[i] = a.k_tiles[t + i + kPrefetchTiles];
        }
        ForRowGroups<ScoreRows>(g, static_cast<const float*>(q), dk, a.k_tiles + t,
                                static_cast<const void* const*>(ahead), pair, a.f16, a.scale,
                                scores + t * kTile, stride);
    }
    for (int64_t m = 0; m < g; ++m) {
        float* row = scores + m * stride;
        if (a.softcap > 0.0f) {
            for (int64_t j = 0; j < n; ++j) row[j] = soft_cap(row[j], a.softcap);
        }
        // Keys before the window are masked (ggml's -inf mask); those beyond n (the last tile's
        // tail) are left out.
        std::fill(row, row + a.skip, -INFINITY);
        Softmax(row, n, a.f16);
    }
    ForRowGroups<WeighRows>(g, static_cast<const float*>(scores), stride, n, a.v_tiles, dv, a.f16,
                            a.out, a.out_stride);
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer {
HWY_EXPORT(AttendGroup);
HWY_EXPORT(SoftmaxRow);

void softmax_like_ggml(float* x, int64_t n) {
    HWY_DYNAMIC_DISPATCH(SoftmaxRow)(x, n);
}

void attend_group(const AttentionGroup& a, AttentionScratch& scratch) {
    const int64_t padded =
        (a.n_keys + kAttentionKeyTile - 1) / kAttentionKeyTile * kAttentionKeyTile;
    HWY_DYNAMIC_DISPATCH(AttendGroup)
    (a, scratch.reserve(static_cast<std::size_t>(a.group * (a.head_dim_k + padded))));
}

}  // namespace minfer
#endif
