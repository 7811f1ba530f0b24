#pragma once
// Vectorized pieces of ops.cpp (Highway, dispatched at run time).

#include <cstdint>

namespace minfer::kernels {

void silu_simd(const float* x, float* y, int64_t n);
void swiglu_simd(const float* gate, const float* up, float* out, int64_t n);
// x[i] = cap * tanh(x[i] * (1 / cap)), tanh within a few ulp of the C library's
void soft_cap_simd(float* x, int64_t n, float cap);
// x[i] = exp(x[i] - shift)
void exp_shifted_simd(float* x, int64_t n, float shift);
double logsumexp_simd(const float* x, int64_t n);
// sum of double(x[i] * x[i]), the products rounded to f32
double sum_of_squares_simd(const float* x, int64_t n);
// gelu through the f32 table of every half's gelu; false (nothing done) without F16C
bool gelu_table_simd(const float* x, float* y, int64_t n, const float* table);
// the index of the first x[i] > threshold, or n
int64_t first_above_simd(const float* x, int64_t n, float threshold);

}  // namespace minfer::kernels
