// Float weights (F32, F16, BF16) in the interleaved layout (packed_layout.h), compiled once per
// Highway target: portable Highway code, so every target has it.
//
// A group's chunk of a stripe is the GEMM's float panel in the file's element type: column k's 16
// rows at element 16k. Per row and token the arithmetic is FloatTile's (gemm_simd.cpp): one
// accumulator, starting at 0 (or at y, the previous stripes' sum), updated by one multiply-add
// per column in column order; so a token's outputs have the same bits alone or in a batch, and
// the same as from the file's layout.
//
// One token (decoding) reads the chunks as they are, kGroups groups at a time: a row's chain of
// multiply-adds waits on each one (4 cycles on Zen 4), and one group is 2 AVX2 vectors, so four
// groups' eight chains keep the FMA units busy. Several tokens convert chunks to an f32 panel
// (F32: a chunk is one) and hand it to gemm_float_panel_simd, as the file's layout does: below
// kWholeRowPanelTokens a stripe at a time, from there on whole rows (with 256 columns a call,
// starting and storing the sums of 64 tokens took a tenth of the time: Llama 1.1B F16 pp64
// 34.8 tokens/s against 39.1 from the file's layout).

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
// Groups multiplied at once by one token: about 8 accumulators (fewer vectors than registers).
constexpr int kGroups = static_cast<int>(std::clamp<size_t>(8 / kVectors, 1, 4));

// One token against G groups' chunks of nb columns (chunk[g]; rows y[g], valid[g] of them): per
// row, acc = MulAdd(w_k, x_k, acc) for k = 0 .. nb - 1, acc starting at y (`accumulate`) or 0.
template <class Elem, int G>
HWY_INLINE void OneToken(const Elem* const* chunk, int64_t nb, const float* HWY_RESTRICT x,
                         float* const* y, const int* valid, bool accumulate) {
    const DF df;
    HWY_ALIGN float out[kPackedRows];
    VF acc[G][kVectors];
    for (int g = 0; g < G; ++g) {
        for (int r = 0; r < kPackedRows; ++r) {
            out[r] = accumulate && r < valid[g] ? y[g][r] : 0.0f;
        }
        for (size_t v = 0; v < kVectors; ++v) acc[g][v] = hn::Load(df, out + v * kLanes);
    }
    for (int64_t k = 0; k < nb; ++k) {
        const VF xk = hn::Set(df, x[k]);
        for (int g = 0; g < G; ++g) {
            const Elem* column = chunk[g] + k * kPackedRows;
            for (size_t v = 0; v < kVectors; ++v) {
                acc[g][v] = hn::MulAdd(LoadColumn(df, column + v * kLanes), xk, acc[g][v]);
            }
        }
    }
    for (int g = 0; g < G; ++g) {
        for (size_t v = 0; v < kVectors; ++v) hn::Store(acc[g][v], df, out + v * kLanes);
        for (int r = 0; r < valid[g]; ++r) y[g][r] = out[r];
    }
}

// nb columns of a chunk into an f32 panel.
template <class Elem>
HWY_INLINE void ToPanel(const Elem* HWY_RESTRICT chunk, int64_t nb, float* HWY_RESTRICT panel) {
    const DF df;
    for (int64_t i = 0; i < nb * kPackedRows; i += kLanes) {
        hn::Store(LoadColumn(df, chunk + i), df, panel + i);
    }
}

// A float matrix's interleaved copy.
template <class Elem>
struct PackedFloats {
    const WeightMatrix& w;
    PackedLayout l;

    explicit PackedFloats(const WeightMatrix& m)
        : w(m), l(packed_layout(m.type, m.n_cols, m.n_rows)) {}
    // Group g's chunk of stripe k.
    const Elem* chunk(int64_t g, int64_t k) const {
        return reinterpret_cast<const Elem*>(w.packed.data() + l.chunk_offset(g, k));
    }
    int valid_rows(int64_t g) const {
        return static_cast<int>(std::min<int64_t>(kPackedRows, w.n_rows - g * kPackedRows));
    }
};

// One token against groups [g0, g1) (one band), stripe by stripe so that a stripe's activations
// stay in L1 while the band's groups pass, kGroups groups at a time.
template <class Elem>
void OneTokenGroups(const PackedFloats<Elem>& m, int64_t g0, int64_t g1, const float* x,
                    float* y) {
    for (int64_t k = 0; k < m.l.n_stripes(); ++k) {
        int64_t g = g0;
        const auto run = [&](auto groups) {
            constexpr int G = decltype(groups)::value;
            const Elem* chunks[G];
            float* rows[G];
            int valid[G];
            for (int i = 0; i < G; ++i) {
                chunks[i] = m.chunk(g + i, k);
                rows[i] = y + (g + i) * kPackedRows;
                valid[i] = m.valid_rows(g + i);
            }
            OneToken<Elem, G>(chunks, m.l.stripe_size(k), x + m.l.stripe_begin(k), rows, valid,
                              k > 0);
            g += G;
        };
        while (g + kGroups <= g1) run(std::integral_constant<int, kGroups>());
        while (g < g1) run(std::integral_constant<int, 1>());
    }
}

// Several tokens against groups [g0, g1) through f32 panels: below kWholeRowPanelTokens one
// stripe of a group at a time (stripe by stripe, as above), else one whole group at a time.
template <class Elem>
void PanelGroups(const PackedFloats<Elem>& m, int64_t g0, int64_t g1, const float* x,
                 int64_t n_tokens, float* y, float* panel) {
    const int64_t n_cols = m.w.n_cols, n_rows = m.w.n_rows;
    if (n_tokens < kWholeRowPanelTokens) {
        for (int64_t k = 0; k < m.l.n_stripes(); ++k) {
            const int64_t nb = m.l.stripe_size(k);
            for (int64_t g = g0; g < g1; ++g) {
                const float* f32_panel = panel;
                if constexpr (std::is_same_v<Elem, float>) {
                    f32_panel = m.chunk(g, k);
                } else {
                    ToPanel(m.chunk(g, k), nb, panel);
                }
                gemm_float_panel_simd(f32_panel, nb, x + m.l.stripe_begin(k), n_cols, n_tokens,
                                      y + g * kPackedRows, n_rows, m.valid_rows(g), k > 0);
            }
        }
        return;
    }
    for (int64_t g = g0; g < g1; ++g) {
        for (int64_t k = 0; k < m.l.n_stripes(); ++k) {
            ToPanel(m.chunk(g, k), m.l.stripe_size(k), panel + m.l.stripe_begin(k) * kPackedRows);
        }
        gemm_float_panel_simd(panel, n_cols, x, n_cols, n_tokens, y + g * kPackedRows, n_rows,
                              m.valid_rows(g), false);
    }
}

template <class Elem>
void PackedFloatGroups(const WeightMatrix& w, int64_t g0, int64_t g1, const float* x,
                       int64_t n_tokens, float* y, float* panel) {
    const PackedFloats<Elem> m(w);
    if (n_tokens == 1) {
        OneTokenGroups(m, g0, g1, x, y);
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
