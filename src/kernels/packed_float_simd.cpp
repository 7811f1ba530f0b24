// Float weights (F32, F16, BF16) in the interleaved layout (packed_layout.h), compiled once per
// Highway target and run on AVX-512, AVX2 and aarch64's NEON (where vcvtph2ps and fcvtl convert F16
// as the file layout's fill does; Highway's emulated conversion on older x86 targets turns f16
// infinities and NaNs into finite values). SVE's vectors have no fixed number of lanes for a
// group's 16 rows: aarch64 runs NEON here also where the CPU has SVE.
//
// A group's column of a stripe is 16 values in the file's element type, its next column 16 x q
// elements on (q: the groups of its quad, 4 but at a band's end). Per row and token the
// arithmetic is FloatTile's (gemm_simd.cpp): one accumulator, starting at 0 (or at y, the
// previous stripes' sum), updated by one multiply-add per column in column order; so a token's
// outputs have the same bits alone or in a batch, and the same as from the file's layout.
//
// Below 32 tokens (decoding up to 31 sequences) the kernels multiply the copy as it is, in tiles
// of about 8 accumulators (a row's chain of multiply-adds waits on each one, 4 cycles on Zen 4):
// one token a quad at a time (one sequential run of bytes), more tokens one group and runs of 4
// tokens (AVX2; AVX-512: 8). Through f32 panels, as the file's layout goes, the conversion
// (where the weights come from memory) and the products took turns (Qwen2 0.5B F16 on a Zen 4
// without AVX-512: 4 sequences decoded 35 tokens/s, 91-101 with the tiles; 16 sequences 58-63,
// 90-99). From 32
// tokens on (the packed_panels_ of matmul.cpp, as for the quantized types) each group goes
// through an f32 panel of whole rows and gemm_float_panel_simd: the products then take far
// longer than the conversion, and the tiles' activations no longer stay in L1 (Llama 1.1B F16
// pp512: 57-59 tokens/s with the tiles, 66-68 through panels).

#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/packed_float_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2 || (HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64)

namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// One column's values of a vector's rows (Elem: float, hwy::float16_t or hwy::bfloat16_t), as f32.
template <class Elem>
HWY_INLINE VF LoadColumn(DF df, const Elem* HWY_RESTRICT p) {
    if constexpr (std::is_same_v<Elem, float>) {
        return hn::Load(df, p);
    } else {
        return hn::PromoteTo(df, hn::Load(hn::Rebind<Elem, DF>(), p));
    }
}

constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr size_t kVectors = kPackedRows / kLanes;  // per group of 16 rows
static_assert(kVectors * kLanes == kPackedRows, "whole vectors per group");
// Tiles of about 8 accumulators (fewer vectors than registers): one token takes the 4 groups of a
// quad (packed_layout.h) at a time (4 accumulators on AVX-512), more tokens one group and runs of
// kTokenRun.
constexpr int kGroups = 4;
constexpr int kTokenRun = static_cast<int>(8 / kVectors);

// T tokens (token t at x + t * x_stride) against nb columns of G groups (group g's column k at
// chunk[g] + k * stride; its valid[g] rows of token t at y[g] + t * y_stride): per row and token,
// acc = MulAdd(w_k, x_k, acc) for k = 0 .. nb - 1, acc starting at y (`accumulate`) or 0.
template <class Elem, int G, int T>
HWY_INLINE void Tile(const Elem* const* chunk, int64_t stride, int64_t nb,
                     const float* HWY_RESTRICT x, int64_t x_stride, float* const* y,
                     int64_t y_stride, const int* valid, bool accumulate) {
    const DF df;
    HWY_ALIGN float out[kPackedRows];
    VF acc[G][T][kVectors];
    for (int g = 0; g < G; ++g) {
        for (int t = 0; t < T; ++t) {
            const float* rows = y[g] + t * y_stride;
            for (int r = 0; r < kPackedRows; ++r) {
                out[r] = accumulate && r < valid[g] ? rows[r] : 0.0f;
            }
            for (size_t v = 0; v < kVectors; ++v) acc[g][t][v] = hn::Load(df, out + v * kLanes);
        }
    }
    for (int64_t k = 0; k < nb; ++k) {
        VF xk[T];
        for (int t = 0; t < T; ++t) xk[t] = hn::Set(df, x[t * x_stride + k]);
        for (int g = 0; g < G; ++g) {
            const Elem* column = chunk[g] + k * stride;
            for (size_t v = 0; v < kVectors; ++v) {
                const VF w = LoadColumn(df, column + v * kLanes);
                for (int t = 0; t < T; ++t) acc[g][t][v] = hn::MulAdd(w, xk[t], acc[g][t][v]);
            }
        }
    }
    for (int g = 0; g < G; ++g) {
        for (int t = 0; t < T; ++t) {
            for (size_t v = 0; v < kVectors; ++v) hn::Store(acc[g][t][v], df, out + v * kLanes);
            float* rows = y[g] + t * y_stride;
            for (int r = 0; r < valid[g]; ++r) rows[r] = out[r];
        }
    }
}

// nb columns of a group (column k at column0 + k * stride) into an f32 panel.
template <class Elem>
HWY_INLINE void ToPanel(const Elem* HWY_RESTRICT column0, int64_t stride, int64_t nb,
                        float* HWY_RESTRICT panel) {
    const DF df;
    for (int64_t k = 0; k < nb; ++k) {
        for (size_t v = 0; v < kVectors; ++v) {
            hn::Store(LoadColumn(df, column0 + k * stride + v * kLanes), df,
                      panel + k * kPackedRows + v * kLanes);
        }
    }
}

// A float matrix's interleaved copy.
template <class Elem>
struct PackedFloats {
    const WeightMatrix& w;
    PackedLayout l;

    explicit PackedFloats(const WeightMatrix& m)
        : w(m), l(packed_layout(m.type, m.n_cols, m.n_rows)) {}
    static constexpr auto kElem = static_cast<int64_t>(sizeof(Elem));
    // Group g's column 0 of stripe k, and the elements from one of its columns to the next.
    const Elem* column0(int64_t g, int64_t k) const {
        return reinterpret_cast<const Elem*>(w.packed.data() +
                                             l.float_column_offset(g, k, 0, kElem));
    }
    int64_t stride(int64_t g) const { return l.float_column_stride(g); }
    int valid_rows(int64_t g) const {
        return static_cast<int>(std::min<int64_t>(kPackedRows, w.n_rows - g * kPackedRows));
    }
};

// Tokens [0, n_tokens) against groups [g0, g1) (one band: its quads start at g0) in tiles,
// stripe by stripe so that a stripe's activations stay near while the band's groups pass: one
// token a whole quad at a time (the band's last, smaller one group by group), more tokens one
// group at a time in runs of kTokenRun, 4, 2 and 1 tokens (the group's columns come from memory
// in the first run, from L1 in the next).
template <class Elem>
void TileGroups(const PackedFloats<Elem>& m, int64_t g0, int64_t g1, const float* x,
                int64_t n_tokens, float* y) {
    const int64_t n_cols = m.w.n_cols, n_rows = m.w.n_rows;
    for (int64_t k = 0; k < m.l.n_stripes(); ++k) {
        const int64_t c0 = m.l.stripe_begin(k), nb = m.l.stripe_size(k);
        // G groups from g on (G = 4: a whole quad) against T tokens from t on.
        const auto tile = [&](auto groups, auto tokens, int64_t g, int64_t t) {
            constexpr int G = decltype(groups)::value, T = decltype(tokens)::value;
            const Elem* chunks[G];
            float* rows[G];
            int valid[G];
            for (int i = 0; i < G; ++i) {
                chunks[i] = m.column0(g + i, k);
                rows[i] = y + t * n_rows + (g + i) * kPackedRows;
                valid[i] = m.valid_rows(g + i);
            }
            Tile<Elem, G, T>(chunks, m.stride(g), nb, x + t * n_cols + c0, n_cols, rows, n_rows,
                             valid, k > 0);
        };
        using One = std::integral_constant<int, 1>;
        if (n_tokens == 1) {
            // g0 starts a band, so a quad: whole quads at once, the band's last smaller one
            // group by group.
            int64_t g = g0;
            for (; g + kGroups <= g1; g += kGroups) {
                tile(std::integral_constant<int, kGroups>(), One(), g, 0);
            }
            for (; g < g1; ++g) tile(One(), One(), g, 0);
            continue;
        }
        for (int64_t g = g0; g < g1; ++g) {
            int64_t t = 0;
            for (; t + kTokenRun <= n_tokens; t += kTokenRun) {
                tile(One(), std::integral_constant<int, kTokenRun>(), g, t);
            }
            if constexpr (kTokenRun > 4) {
                if (t + 4 <= n_tokens) {
                    tile(One(), std::integral_constant<int, 4>(), g, t);
                    t += 4;
                }
            }
            if constexpr (kTokenRun > 2) {
                if (t + 2 <= n_tokens) {
                    tile(One(), std::integral_constant<int, 2>(), g, t);
                    t += 2;
                }
            }
            if (t < n_tokens) tile(One(), One(), g, t);
        }
    }
}

// Many tokens against groups [g0, g1) through f32 panels: each group's stripes converted into a
// panel of whole rows, which gemm_float_panel_simd multiplies with every token.
template <class Elem>
void PanelGroups(const PackedFloats<Elem>& m, int64_t g0, int64_t g1, const float* x,
                 int64_t n_tokens, float* y, float* panel) {
    const int64_t n_cols = m.w.n_cols;
    for (int64_t g = g0; g < g1; ++g) {
        for (int64_t k = 0; k < m.l.n_stripes(); ++k) {
            ToPanel(m.column0(g, k), m.stride(g), m.l.stripe_size(k),
                    panel + m.l.stripe_begin(k) * kPackedRows);
        }
        gemm_float_panel_simd(panel, n_cols, x, n_cols, n_tokens, y + g * kPackedRows,
                              m.w.n_rows, m.valid_rows(g), false);
    }
}

template <class Elem>
void PackedFloatGroups(const WeightMatrix& w, int64_t g0, int64_t g1, const float* x,
                       int64_t n_tokens, float* y, float* panel) {
    const PackedFloats<Elem> m(w);
    if (panel == nullptr) {
        TileGroups(m, g0, g1, x, n_tokens, y);
    } else {
        PanelGroups(m, g0, g1, x, n_tokens, y, panel);
    }
}

void PackedFloatMatmul(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                       const float* x, int64_t n_tokens, float* y, float* panel) {
    switch (w.type) {
        case GgmlType::F32:
            return PackedFloatGroups<float>(w, group_begin, group_end, x, n_tokens, y, panel);
        case GgmlType::F16:
            return PackedFloatGroups<hwy::float16_t>(w, group_begin, group_end, x, n_tokens, y,
                                                     panel);
        case GgmlType::BF16:
            return PackedFloatGroups<hwy::bfloat16_t>(w, group_begin, group_end, x, n_tokens, y,
                                                      panel);
        default:
            return;
    }
}

#else

void PackedFloatMatmul(const WeightMatrix&, int64_t, int64_t, const float*, int64_t, float*,
                       float*) {}

#endif  // AVX3, AVX2 or aarch64's NEON

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(PackedFloatMatmul);

void packed_float_matmul_simd(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                              const float* x, int64_t n_tokens, float* y, float* panel) {
    HWY_DYNAMIC_DISPATCH(PackedFloatMatmul)(w, group_begin, group_end, x, n_tokens, y, panel);
}

}  // namespace minfer::kernels
#endif
