// Highway implementation of attention.h; compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
// clang-format off: the per-target header must follow highway.h
#include <hwy/contrib/math/math-inl.h>
// clang-format on

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

HWY_BEFORE_NAMESPACE();
namespace minfer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DH = hn::Rebind<hwy::float16_t, DF>;

// Row of n cache values (f16 or f32) widened to f32 (n a multiple of the lanes, or a scalar tail).
void LoadRow(const void* src, bool f16, float* dst, int64_t n) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    int64_t i = 0;
    if (f16) {
        const DH dh;
        const auto* h = static_cast<const hwy::float16_t*>(src);
        for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, h + i)), df, dst + i);
        const hn::CappedTag<float, 1> d1;
        const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
        for (; i < n; ++i) hn::StoreU(hn::PromoteTo(d1, hn::LoadU(h1, h + i)), d1, dst + i);
    } else {
        const auto* f = static_cast<const float*>(src);
        for (; i < n; ++i) dst[i] = f[i];
    }
}

// x rounded to f16 and back (round to nearest even), in place.
void RoundToF16(float* x, int64_t n) {
    const DF df;
    const DH dh;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::PromoteTo(df, hn::DemoteTo(dh, hn::LoadU(df, x + i))), df, x + i);
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
    for (; i < n; ++i) hn::StoreU(hn::PromoteTo(d1, hn::DemoteTo(h1, hn::LoadU(d1, x + i))), d1, x + i);
}

float Dot(const float* a, const float* b, int64_t n) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    auto s0 = hn::Zero(df), s1 = hn::Zero(df);
    int64_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
        s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
        s1 = hn::MulAdd(hn::LoadU(df, a + i + lanes), hn::LoadU(df, b + i + lanes), s1);
    }
    for (; i + lanes <= n; i += lanes) s0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), s0);
    float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(s0, s1)));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

// y += w * x
void Axpy(float w, const float* x, float* y, int64_t n) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const auto vw = hn::Set(df, w);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::MulAdd(vw, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
    for (; i < n; ++i) y[i] += w * x[i];
}

// Softmax of s[n] in place; the sum of exponentials is accumulated in double, as ggml does.
void Softmax(float* s, int64_t n) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max = std::max(max, s[i]);
    int64_t i = 0;
    double sum = 0.0;
    // std::exp rather than a vectorized approximation: the golden files' tightest model
    // (tiny-qwen3) moves from 0.286 to 0.328 of its 0.33 tolerance with Highway's Exp.
    for (; i < n; ++i) {
        s[i] = std::exp(s[i] - max);
        sum += s[i];
    }
    i = 0;
    const auto inv = hn::Set(df, static_cast<float>(1.0 / sum));
    for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Mul(hn::LoadU(df, s + i), inv), df, s + i);
    const float inv_s = static_cast<float>(1.0 / sum);
    for (; i < n; ++i) s[i] *= inv_s;
}

void AttendGroup(const AttentionGroup& a, float* scratch) {
    const int64_t dk = a.head_dim_k, dv = a.head_dim_v, g = a.group, n = a.n_keys;
    float* q = scratch;              // [g][dk]
    float* scores = q + g * dk;      // [g][n]
    float* row = scores + g * n;     // [max(dk, dv)]
    for (int64_t m = 0; m < g; ++m) {
        std::copy(a.q + m * a.q_stride, a.q + m * a.q_stride + dk, q + m * dk);
        if (a.f16) RoundToF16(q + m * dk, dk);
    }
    const auto* k = static_cast<const std::byte*>(a.k);
    for (int64_t p = 0; p < n; ++p) {
        LoadRow(k + static_cast<std::size_t>(p) * a.k_stride, a.f16, row, dk);
        for (int64_t m = 0; m < g; ++m) scores[m * n + p] = Dot(q + m * dk, row, dk) * a.scale;
    }
    for (int64_t m = 0; m < g; ++m) {
        Softmax(scores + m * n, n);
        // ggml weighs V with the probabilities converted to V's type.
        if (a.f16) RoundToF16(scores + m * n, n);
        std::fill(a.out + m * a.out_stride, a.out + m * a.out_stride + dv, 0.0f);
    }
    const auto* v = static_cast<const std::byte*>(a.v);
    for (int64_t p = 0; p < n; ++p) {
        LoadRow(v + static_cast<std::size_t>(p) * a.v_stride, a.f16, row, dv);
        for (int64_t m = 0; m < g; ++m) Axpy(scores[m * n + p], row, a.out + m * a.out_stride, dv);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer {
HWY_EXPORT(AttendGroup);

void attend_group(const AttentionGroup& a, AttentionScratch& scratch) {
    const auto need = static_cast<std::size_t>(a.group * a.head_dim_k + a.group * a.n_keys +
                                               std::max(a.head_dim_k, a.head_dim_v));
    HWY_DYNAMIC_DISPATCH(AttendGroup)(a, scratch.reserve(need));
}

}  // namespace minfer
#endif
