// ggml's vectorized expf, shared by the kernels whose results should carry the reference's
// exact bits (softmax, silu). Per-target code: included after hwy/highway.h by a file that
// foreach_target.h compiles once per target.

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GGML_EXP_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GGML_EXP_INL_H_
#undef MINFER_KERNELS_GGML_EXP_INL_H_
#else
#define MINFER_KERNELS_GGML_EXP_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

// The exponential as ggml's CPU backend computes it on whole vectors (its softmax and silu; the C
// library's expf takes the remainder): 2^n * p(b) with n = round(x / ln 2), b = x - n ln 2 (ln 2
// in two parts) and p of degree 5; within 2 ulp of exp. It costs a third of a correctly rounded
// exponential through double. Results below 2^-126 are flushed to zero (ggml keeps some as
// subnormals) and x must stay below 88.7 (ggml's own limit for a finite result).
template <class D, class V = hwy::HWY_NAMESPACE::Vec<D>>
HWY_INLINE V GgmlExp(D df, V x) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::RebindToSigned<D> di;
    const V shifter = hn::Set(df, 0x1.8p23f);
    const V n = hn::Sub(hn::MulAdd(x, hn::Set(df, 0x1.715476p+0f), shifter), shifter);
    const V b = hn::NegMulAdd(n, hn::Set(df, 0x1.7f7d1cp-20f),
                              hn::NegMulAdd(n, hn::Set(df, 0x1.62e4p-1f), x));
    const V u = hn::Mul(b, b);
    const V p = hn::MulAdd(
        hn::MulAdd(hn::MulAdd(hn::Set(df, 0x1.0e4020p-7f), b, hn::Set(df, 0x1.573e2ep-5f)), u,
                   hn::MulAdd(hn::Set(df, 0x1.555e66p-3f), b, hn::Set(df, 0x1.fffdb6p-2f))),
        u, hn::MulAdd(hn::Set(df, 0x1.ffffecp-1f), b, hn::Set(df, 1.0f)));
    const auto normal = hn::Ge(n, hn::Set(df, -126.0f));
    const auto exponent = hn::ShiftLeft<23>(hn::Add(hn::ConvertTo(di, n), hn::Set(di, 127)));
    return hn::IfThenElseZero(normal, hn::Mul(p, hn::BitCast(df, exponent)));
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
