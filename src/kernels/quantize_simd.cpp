// Activation quantization (Q8_0 / Q8_1 / Q8_K) with SIMD, bit-identical with the scalar
// versions in activation_quant.cpp. Compiled once per Highway target.

#include "kernels/activation_quant.h"
#include "kernels/matmul_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quantize_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

void QuantizeActivations(GgmlType activation_type, const float* x, std::byte* out, int64_t n) {
    if (activation_type == GgmlType::Q8_0) {
        quantize_activations_q8_0(x, reinterpret_cast<block_q8_0*>(out), n);
    } else if (activation_type == GgmlType::Q8_1) {
        quantize_activations_q8_1(x, reinterpret_cast<block_q8_1*>(out), n);
    } else {
        quantize_activations_q8_K(x, reinterpret_cast<block_q8_K*>(out), n);
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(QuantizeActivations);

void quantize_activations_simd(GgmlType activation_type, const float* x, std::byte* out,
                               int64_t n) {
    HWY_DYNAMIC_DISPATCH(QuantizeActivations)(activation_type, x, out, n);
}

}  // namespace minfer::kernels
#endif
