// Highway implementations of vector_ops.h; this file is compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/vector_ops.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/vector_ops.h"

HWY_BEFORE_NAMESPACE();
namespace minfer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DH = hn::Rebind<hwy::float16_t, DF>;

float DotF16(const uint16_t* a, const uint16_t* b, int64_t n) {
    const DF df;
    const DH dh;
    const auto* pa = reinterpret_cast<const hwy::float16_t*>(a);
    const auto* pb = reinterpret_cast<const hwy::float16_t*>(b);
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    auto sum0 = hn::Zero(df), sum1 = hn::Zero(df);
    int64_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
        sum0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, pa + i)),
                          hn::PromoteTo(df, hn::LoadU(dh, pb + i)), sum0);
        sum1 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, pa + i + lanes)),
                          hn::PromoteTo(df, hn::LoadU(dh, pb + i + lanes)), sum1);
    }
    for (; i + lanes <= n; i += lanes) {
        sum0 = hn::MulAdd(hn::PromoteTo(df, hn::LoadU(dh, pa + i)),
                          hn::PromoteTo(df, hn::LoadU(dh, pb + i)), sum0);
    }
    float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(sum0, sum1)));
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
    for (; i < n; ++i) {
        sum += hn::GetLane(hn::PromoteTo(d1, hn::LoadU(h1, pa + i))) *
               hn::GetLane(hn::PromoteTo(d1, hn::LoadU(h1, pb + i)));
    }
    return sum;
}

float DotF32(const float* a, const float* b, int64_t n) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    auto sum0 = hn::Zero(df), sum1 = hn::Zero(df);
    int64_t i = 0;
    for (; i + 2 * lanes <= n; i += 2 * lanes) {
        sum0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), sum0);
        sum1 = hn::MulAdd(hn::LoadU(df, a + i + lanes), hn::LoadU(df, b + i + lanes), sum1);
    }
    for (; i + lanes <= n; i += lanes)
        sum0 = hn::MulAdd(hn::LoadU(df, a + i), hn::LoadU(df, b + i), sum0);
    float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(sum0, sum1)));
    for (; i < n; ++i) sum += a[i] * b[i];
    return sum;
}

void AxpyF16(float a, const uint16_t* x, float* y, int64_t n) {
    const DF df;
    const DH dh;
    const auto* px = reinterpret_cast<const hwy::float16_t*>(x);
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const auto va = hn::Set(df, a);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes) {
        hn::StoreU(hn::MulAdd(va, hn::PromoteTo(df, hn::LoadU(dh, px + i)), hn::LoadU(df, y + i)),
                   df, y + i);
    }
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
    for (; i < n; ++i) y[i] += a * hn::GetLane(hn::PromoteTo(d1, hn::LoadU(h1, px + i)));
}

void AxpyF32(float a, const float* x, float* y, int64_t n) {
    const DF df;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    const auto va = hn::Set(df, a);
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes)
        hn::StoreU(hn::MulAdd(va, hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, y + i);
    for (; i < n; ++i) y[i] += a * x[i];
}

void ConvertF32ToF16(const float* x, uint16_t* y, int64_t n) {
    const DF df;
    const DH dh;
    auto* py = reinterpret_cast<hwy::float16_t*>(y);
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes)
        hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, x + i)), dh, py + i);
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
    for (; i < n; ++i) hn::StoreU(hn::DemoteTo(h1, hn::LoadU(d1, x + i)), h1, py + i);
}

void ConvertF16ToF32(const uint16_t* x, float* y, int64_t n) {
    const DF df;
    const DH dh;
    const auto* px = reinterpret_cast<const hwy::float16_t*>(x);
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
    int64_t i = 0;
    for (; i + lanes <= n; i += lanes)
        hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, px + i)), df, y + i);
    const hn::CappedTag<float, 1> d1;
    const hn::Rebind<hwy::float16_t, decltype(d1)> h1;
    for (; i < n; ++i) hn::StoreU(hn::PromoteTo(d1, hn::LoadU(h1, px + i)), d1, y + i);
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer {
HWY_EXPORT(DotF16);
HWY_EXPORT(DotF32);
HWY_EXPORT(AxpyF16);
HWY_EXPORT(AxpyF32);
HWY_EXPORT(ConvertF32ToF16);
HWY_EXPORT(ConvertF16ToF32);

float dot_f16(const uint16_t* a, const uint16_t* b, int64_t n) {
    return HWY_DYNAMIC_DISPATCH(DotF16)(a, b, n);
}
float dot_f32(const float* a, const float* b, int64_t n) {
    return HWY_DYNAMIC_DISPATCH(DotF32)(a, b, n);
}
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(AxpyF16)(a, x, y, n);
}
void axpy_f32(float a, const float* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(AxpyF32)(a, x, y, n);
}
void convert_f32_to_f16(const float* x, uint16_t* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(ConvertF32ToF16)(x, y, n);
}
void convert_f16_to_f32(const uint16_t* x, float* y, int64_t n) {
    HWY_DYNAMIC_DISPATCH(ConvertF16ToF32)(x, y, n);
}
}  // namespace minfer
#endif
