// The exp-heavy ops (silu, swiglu, softmax's exponentials), compiled once per target. silu and
// swiglu compute as ggml does: its vectorized expf on whole vectors, the C library's on the rest;
// the standalone softmax uses Highway's exp (at most 1 ulp from std::exp). During prefill these
// run over every feed-forward activation, so scalar exp would cost a third as much as the
// matmuls.

#include <cmath>
#include <cstdint>

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

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(SiluRow);
HWY_EXPORT(SwigluRow);
HWY_EXPORT(ExpShifted);
HWY_EXPORT(LogSumExp);

void silu_simd(const float* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(SiluRow)(x, y, n);
}
void swiglu_simd(const float* gate, const float* up, float* out, int64_t n) {
    HWY_DYNAMIC_DISPATCH(SwigluRow)(gate, up, out, n);
}
void exp_shifted_simd(float* x, int64_t n, float shift) {
    HWY_DYNAMIC_DISPATCH(ExpShifted)(x, n, shift);
}
double logsumexp_simd(const float* x, int64_t n) {
    return HWY_DYNAMIC_DISPATCH(LogSumExp)(x, n);
}

}  // namespace minfer::kernels
#endif
