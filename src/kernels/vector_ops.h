#pragma once
// Small vector primitives of attention, SIMD through Highway's run-time dispatch: dot products of
// f16 and f32 rows (f16 values widened to f32 and multiplied-added in f32), and y += a * x.

#include <cstdint>

namespace minfer {

float dot_f16(const uint16_t* a, const uint16_t* b, int64_t n);
float dot_f32(const float* a, const float* b, int64_t n);
// y[i] += a * x[i]
void axpy_f16(float a, const uint16_t* x, float* y, int64_t n);
void axpy_f32(float a, const float* x, float* y, int64_t n);
// Row conversions with ggml's rounding: y[i] = f16(x[i]) rounded to nearest even, and back.
void convert_f32_to_f16(const float* x, uint16_t* y, int64_t n);
void convert_f16_to_f32(const uint16_t* x, float* y, int64_t n);

}  // namespace minfer
