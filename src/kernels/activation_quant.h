#pragma once
// The on-the-fly activation formats of matmul, bit-identical with ggml on x86 (the arithmetic of
// its AVX2 quantize_row_q8_0 / q8_1 and of quantize_row_q8_K_ref, which x86 uses):
//   Q8_0, Q8_1: d = amax / 127, q = round-half-even(x * (127 / amax)), d stored as f16;
//               Q8_1 adds s = f16(d * sum(q)).
//   Q8_K:       the value of largest magnitude `max` maps to -127: iscale = -127 / max,
//               q = min(127, nearest_int(iscale * x)), d = 1 / iscale (f32), bsums = sums of 16.
// Rows are n values long, n a multiple of the block size (32 or 256).

#include <cstdint>

#include "gguf/ggml_type.h"
#include "quant/block_types.h"

namespace minfer {

// The activation type ggml pairs with weights of `weight_type` (ggml's vec_dot_type): Q8_0,
// Q8_1, Q8_K, F16, BF16 or F32. Throws UnsupportedError for a type matmul does not handle.
GgmlType activation_type(GgmlType weight_type);

void quantize_activations_q8_0(const float* x, block_q8_0* y, int64_t n);
void quantize_activations_q8_1(const float* x, block_q8_1* y, int64_t n);
void quantize_activations_q8_K(const float* x, block_q8_K* y, int64_t n);

// x rounded to f16 / bf16 (ggml's conversion, round to nearest even) and widened back to f32:
// the values ggml's F16 / BF16 dot products see.
void round_activations_f16(const float* x, float* y, int64_t n);
void round_activations_bf16(const float* x, float* y, int64_t n);

}  // namespace minfer
