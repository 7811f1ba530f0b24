// The exp-heavy ops (silu, swiglu, softmax's exponentials, the logits' soft-cap), gelu's table
// lookups, rms_norm's sum of squares and the sampler's scan, compiled once per target. silu and
// swiglu compute as ggml does: its vectorized expf on whole vectors, the C library's on the rest;
// the standalone softmax uses Highway's exp (at most 1 ulp from std::exp). During prefill these run
// over every feed-forward activation, so scalar exp would cost a third as much as the matmuls.

#include <cmath>
#include <cstdint>

#include "core/half.h"
#include "kernels/ops_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ops_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format off: the per-target header must follow highway.h
#include "hwy/contrib/math/math-inl.h"
#include "kernels/ggml_exp-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// x / (1 + exp(-x)); -x is capped at 88 (exp stays finite; the result is then ~0 anyway).
template <class D, class V>
HWY_INLINE V Silu(D d, V x) {
    const V e = GgmlExp(d, hn::Min(hn::Neg(x), hn::Set(d, 88.0f)));
    return hn::Div(x, hn::Add(hn::Set(d, 1.0f), e));
}

void SiluRow(const float* x, float* y, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    int64_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(Silu(d, hn::LoadU(d, x + i)), d, y + i);
    for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void SwigluRow(const float* gate, const float* up, float* out, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    int64_t i = 0;
    for (; i + N <= n; i += N) {
        hn::StoreU(hn::Mul(Silu(d, hn::LoadU(d, gate + i)), hn::LoadU(d, up + i)), d, out + i);
    }
    for (; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

// cap * tanh(x * (1 / cap)), in place: Highway's tanh (a few ulp from the C library's) on whole
// vectors, the C library's on the rest.
void SoftCapRow(float* x, int64_t n, float cap) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto inverse = hn::Set(d, 1.0f / cap), scale = hn::Set(d, cap);
    int64_t i = 0;
    for (; i + N <= n; i += N) {
        hn::StoreU(hn::Mul(hn::Tanh(d, hn::Mul(hn::LoadU(d, x + i), inverse)), scale), d, x + i);
    }
    for (; i < n; ++i) x[i] = std::tanh(x[i] * (1.0f / cap)) * cap;
}

void ExpShifted(float* x, int64_t n, float shift) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto s = hn::Set(d, shift);
    int64_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), s)), d, x + i);
    for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

// log(sum(exp(x))): a vector max, then the exponentials summed in float lanes (the sum's
// rounding is far below what a log-probability shows).
double LogSumExp(const float* x, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    auto vmax = hn::Set(d, -INFINITY);
    int64_t i = 0;
    for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
    float max = hn::GetLane(hn::MaxOfLanes(d, vmax));
    for (; i < n; ++i) max = std::fmax(max, x[i]);
    if (max == -INFINITY) return -INFINITY;
    const auto s = hn::Set(d, max);
    auto sum = hn::Zero(d);
    for (i = 0; i + N <= n; i += N) sum = hn::Add(sum, hn::Exp(d, hn::Sub(hn::LoadU(d, x + i), s)));
    double total = hn::GetLane(hn::SumOfLanes(d, sum));
    for (; i < n; ++i) total += std::exp(x[i] - max);
    return static_cast<double>(max) + std::log(total);
}

// The sum of x[i] * x[i] over n values: each product rounded to f32 (as ggml's rms_norm does),
// then added in double lanes. Only the order of the double additions differs from ggml's
// sequential loop (a relative difference near 1e-16, far below the f32 mean taken of it); the
// scalar chain of dependent double additions took 0.83 us for 896 values, this 0.18.
double SumOfSquares(const float* x, int64_t n) {
    double sum = 0.0;
    int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR
    const hn::ScalableTag<float> df;
    const hn::Repartition<double, decltype(df)> dd;
    const hn::Half<decltype(df)> dh;  // as many floats as dd has doubles
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    auto sum0 = hn::Zero(dd), sum1 = hn::Zero(dd);
    for (; i + N <= n; i += N) {
        const auto v = hn::LoadU(df, x + i);
        const auto square = hn::Mul(v, v);
        sum0 = hn::Add(sum0, hn::PromoteTo(dd, hn::LowerHalf(dh, square)));
        sum1 = hn::Add(sum1, hn::PromoteTo(dd, hn::UpperHalf(dh, square)));
    }
    sum = hn::GetLane(hn::SumOfLanes(dd, hn::Add(sum0, sum1)));
#endif
    for (; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    return sum;
}

// The index of the first x[i] > threshold (NaN never is), or n.
int64_t FirstAbove(const float* x, int64_t n, float threshold) {
    const hn::ScalableTag<float> d;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto t = hn::Set(d, threshold);
    int64_t i = 0;
    for (; i + 4 * N <= n; i += 4 * N) {
        // Four vectors a test: a sampler's threshold rejects almost every logit.
        const auto m01 = hn::Or(hn::Gt(hn::LoadU(d, x + i), t), hn::Gt(hn::LoadU(d, x + i + N), t));
        const auto m23 =
            hn::Or(hn::Gt(hn::LoadU(d, x + i + 2 * N), t), hn::Gt(hn::LoadU(d, x + i + 3 * N), t));
        if (!hn::AllFalse(d, hn::Or(m01, m23))) break;
    }
    for (; i + N <= n; i += N) {
        const auto m = hn::Gt(hn::LoadU(d, x + i), t);
        if (!hn::AllFalse(d, m)) return i + static_cast<int64_t>(hn::FindKnownFirstTrue(d, m));
    }
    for (; i < n; ++i) {
        if (x[i] > threshold) return i;
    }
    return n;
}

// gelu(x) looked up in ggml's table as ops.cpp's gelu() does, 16 values at a time: 0 from -10
// down, x from 10 up, else table[f16(x)] (the table of every half's gelu, widened to f32). Only
// where the f32 -> f16 conversion is the hardware's (F16C: round to nearest even, as
// f32_to_f16); Highway emulates it elsewhere by truncating, so those targets return false.
bool GeluTableRow(const float* x, float* y, int64_t n, const float* table) {
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
    const hn::ScalableTag<float> d;
    const hn::Rebind<hwy::float16_t, decltype(d)> dh;
    const hn::Rebind<uint16_t, decltype(d)> du16;
    const hn::RebindToUnsigned<decltype(d)> du;
    const hn::RebindToSigned<decltype(d)> di;
    const int64_t N = static_cast<int64_t>(hn::Lanes(d));
    const auto low = hn::Set(d, -10.0f), high = hn::Set(d, 10.0f);
    int64_t i = 0;
    for (; i + N <= n; i += N) {
        const auto v = hn::LoadU(d, x + i);
        const auto half_bits = hn::PromoteTo(du, hn::BitCast(du16, hn::DemoteTo(dh, v)));
        auto g = hn::GatherIndex(d, table, hn::BitCast(di, half_bits));
        g = hn::IfThenZeroElse(hn::Le(v, low), g);
        hn::StoreU(hn::IfThenElse(hn::Ge(v, high), v, g), d, y + i);
    }
    for (; i < n; ++i) {
        const float v = x[i];
        y[i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : table[f32_to_f16(v)];
    }
    return true;
#else
    (void)x, (void)y, (void)n, (void)table;
    return false;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(SiluRow);
HWY_EXPORT(SwigluRow);
HWY_EXPORT(SoftCapRow);
HWY_EXPORT(ExpShifted);
HWY_EXPORT(LogSumExp);
HWY_EXPORT(SumOfSquares);
HWY_EXPORT(FirstAbove);
HWY_EXPORT(GeluTableRow);

void silu_simd(const float* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(SiluRow)(x, y, n);
}
void swiglu_simd(const float* gate, const float* up, float* out, int64_t n) {
    HWY_DYNAMIC_DISPATCH(SwigluRow)(gate, up, out, n);
}
void soft_cap_simd(float* x, int64_t n, float cap) {
    HWY_DYNAMIC_DISPATCH(SoftCapRow)(x, n, cap);
}
void exp_shifted_simd(float* x, int64_t n, float shift) {
    HWY_DYNAMIC_DISPATCH(ExpShifted)(x, n, shift);
}
double logsumexp_simd(const float* x, int64_t n) {
    return HWY_DYNAMIC_DISPATCH(LogSumExp)(x, n);
}
double sum_of_squares_simd(const float* x, int64_t n) {
    return HWY_DYNAMIC_DISPATCH(SumOfSquares)(x, n);
}
int64_t first_above_simd(const float* x, int64_t n, float threshold) {
    return HWY_DYNAMIC_DISPATCH(FirstAbove)(x, n, threshold);
}
bool gelu_table_simd(const float* x, float* y, int64_t n, const float* table) {
    return HWY_DYNAMIC_DISPATCH(GeluTableRow)(x, y, n, table);
}

}  // namespace minfer::kernels
#endif
