#pragma once
// Entry points of the SIMD kernels (Highway, dispatched at run time to the best target).

#include "kernels/matmul_internal.h"

namespace minfer::kernels {

// True if gemv_rows_simd has a kernel for the type on this CPU.
bool gemv_simd_handles(GgmlType type);

// GEMV, token by token, for rows [row_begin, row_end): returns false if no SIMD kernel exists for
// the type on this CPU (the caller then uses the scalar reference).
bool gemv_rows_simd(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                    int64_t row_end, float* y);

// Unpacks a whole panel with SIMD (AVX-512: Q4_0, Q5_0, Q8_0, Q4_K, Q6_K) exactly as
// fill_int_panel does; returns false when it does not handle the type, target or rows.
bool fill_int_panel_simd(const WeightMatrix& w, int64_t row_begin, const IntPanel& panel);

// One integer panel times every token: y[t * y_stride + r] for its n_valid_rows rows.
void gemm_int_panel_simd(const IntPanel& panel, const IntActivations& act, int64_t n_tokens,
                         float* y, int64_t y_stride, int n_valid_rows);

// One float panel times every token of x ([n_tokens][n_cols] f32).
void gemm_float_panel_simd(const float* panel, const float* x, int64_t n_cols, int64_t n_tokens,
                           float* y, int64_t y_stride, int n_valid_rows);

// Activation quantization with SIMD, bit-identical with activation_quant.h.
void quantize_activations_simd(GgmlType activation_type, const float* x, std::byte* out, int64_t n);

}  // namespace minfer::kernels
