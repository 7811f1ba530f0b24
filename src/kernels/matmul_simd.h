#pragma once
// Entry points of the SIMD kernels (Highway, dispatched at run time to the best target).

#include <string>

#include "kernels/matmul_internal.h"

namespace minfer::kernels {

// True where gemv_rows_simd has a kernel for weights of `type` on this CPU (x86's AVX2 and
// AVX-512 targets); elsewhere one token takes the panel kernels (aarch64's sdot and i8mm).
bool gemv_simd_available(GgmlType type);

// GEMV, token by token, for rows [row_begin, row_end): returns false if no SIMD kernel exists for
// the type on this CPU (the caller then uses the scalar reference).
bool gemv_rows_simd(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                    int64_t row_end, float* y);

// Unpacks blocks [block_begin, block_begin + panel.n_blocks) of a whole panel's rows with SIMD
// (AVX-512: Q4_0, Q5_0, Q8_0, Q4_K, Q6_K) exactly as fill_int_panel does, prefetching the same
// bytes prefetch_delta further (what the next panel or chunk reads; 0: none); returns false when
// it does not handle the type, target or rows.
bool fill_int_panel_simd(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                         const IntPanel& panel, int64_t prefetch_delta);

// The same for float panels: columns [col_begin, col_begin + n_cols) (AVX-512: F32, F16, BF16).
bool fill_float_panel_simd(const WeightMatrix& w, int64_t row_begin, int64_t col_begin,
                           int64_t n_cols, float* panel, int64_t prefetch_delta);

// One token against blocks [block_begin, block_begin + n_blocks) of rows [row_begin, row_begin +
// 16), unpacked in registers rather than into a panel (AVX-512: Q4_0, Q5_0, Q8_0, Q4_K, Q6_K;
// whole panels; act of one token): y[r] as gemm_int_panel_simd computes it, bit for bit, with the
// same `accumulate` and the prefetching of fill_int_panel_simd; false when not handled.
bool gemv_panel_simd(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                     int64_t n_blocks, const IntActivations& act, float* y, bool accumulate,
                     int64_t prefetch_delta);

// One integer panel times tokens [0, n_tokens): y[t * y_stride + r] for its n_valid_rows rows.
// The panel holds blocks [block_begin, block_begin + panel.n_blocks) of its rows (all of them, or
// a chunk); with `accumulate` the sums continue from the values in y (the previous chunks').
void gemm_int_panel_simd(const IntPanel& panel, const IntActivations& act, int64_t block_begin,
                         int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                         bool accumulate);
// The same for n_panels (1 or 2) panels of the same columns and consecutive rows (panel i's in y +
// 16 i; n_valid_rows counted over all of them), with the same bits: AVX-512 multiplies two at once,
// one load of each token's activations serving both.
void gemm_int_panels_simd(const IntPanel* panels, int n_panels, const IntActivations& act,
                          int64_t block_begin, int64_t n_tokens, float* y, int64_t y_stride,
                          int n_valid_rows, bool accumulate);

// What gemm_int_panel_simd (or, with float_weights, gemm_float_panel_simd) runs on this CPU now:
// its Highway target and the extensions it uses, e.g. "AVX3 VNNI", "NEON DOTPROD (sdot)".
std::string gemm_panel_kernel_name(bool float_weights);

// One float panel of n_cols columns times tokens [0, n_tokens) of x (token t at x + t * x_stride,
// x pointing at the panel's first column), accumulating into y like gemm_int_panel_simd.
void gemm_float_panel_simd(const float* panel, int64_t n_cols, const float* x, int64_t x_stride,
                           int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                           bool accumulate);

// ---- the interleaved layout (packed_layout.h; w.packed holds it) ----

// True when the kernel path in use has kernels for `type` in the interleaved layout (AVX-512, AVX2
// and aarch64's NEON).
bool packed_kernels_available(GgmlType type);

// Tokens [0, n_tokens) of act against groups [group_begin, group_end) of w.packed, multiplied as
// the blocks are decoded: y[t * w.n_rows + r] for the groups' rows (act in tiles of 1 for one
// token, of kTokenTile otherwise). Per row and token the float operations of
// gemm_int_panel_simd, so the same bits.
void packed_matmul_simd(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                        const IntActivations& act, int64_t n_tokens, float* y);

// Group `group` of w.packed decoded into a panel of all n_cols columns, exactly as fill_int_panel
// unpacks the file's layout.
void fill_int_panel_packed_simd(const WeightMatrix& w, int64_t group, const IntPanel& panel);

// Tokens [0, n_tokens) of x (row t at x + t * w.n_cols: f32, or F16/BF16 activations as rounded
// f32) against groups [group_begin, group_end) (one whole band) of float weights (F32, F16, BF16)
// in w.packed:
// y[t * w.n_rows + r] for the groups' rows, each with the float operations of
// gemm_float_panel_simd, so the same bits. With `panel` (float_panel_bytes(w.n_cols) of memory)
// each group goes through an f32 panel of whole rows (many tokens), else the kernels multiply the
// interleaved values as they are.
void packed_float_matmul_simd(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                              const float* x, int64_t n_tokens, float* y, float* panel);

// Activation quantization with SIMD, bit-identical with activation_quant.h.
void quantize_activations_simd(GgmlType activation_type, const float* x, std::byte* out, int64_t n);

}  // namespace minfer::kernels
