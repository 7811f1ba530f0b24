#pragma once
// Pieces of matmul shared between the driver (matmul.cpp), the scalar reference and the SIMD
// kernels (Highway, one copy per target). Not part of the public API.

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/matmul.h"

namespace minfer::kernels {

// x after conversion to the activation type: n_tokens rows of row_bytes each.
struct Activations {
    GgmlType type;  // Q8_0, Q8_1, Q8_K or F32 (F16/BF16 activations are kept as rounded f32)
    const std::byte* data;
    std::size_t row_bytes;
    int64_t n_tokens;
};

// Bytes of one activation row of n_cols values.
std::size_t activation_row_bytes(GgmlType activation_type, int64_t n_cols);

// The scalar reference: y[t * y_stride + r] for rows [row_begin, row_end) and every token.
void matmul_rows_scalar(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                        int64_t row_end, float* y, int64_t y_stride);

// One weight row against one activation row, in ggml's integer/float arithmetic.
float dot_row_scalar(GgmlType type, const std::byte* w_row, const std::byte* act_row,
                     int64_t n_cols);

// ---- GEMM panels: kPanelRows weight rows unpacked once, then reused for every token ----

inline constexpr int kPanelRows = 16;

// Integer panel of a quantized type, sub-blocks of sub_size values (16 or 32):
//   q:      per sub-block, per group of 4 values: kPanelRows rows x 4 int8 (64 bytes),
//   wsum:   per sub-block and row, -128 * sum(q) (activations are stored as q + 128),
//   scale:  per sub-block and row, d * scale (f32),
//   offset: per sub-block and row, -dmin * min (f32; only when has_min).
// Rows past the matrix end are zero.
struct IntPanel {
    int8_t* q;
    int32_t* wsum;
    float* scale;
    float* offset;
    int64_t n_sub;
    int sub_size;
    bool has_min;
};
std::size_t int_panel_bytes(GgmlType type, int64_t n_cols);
IntPanel int_panel_at(std::byte* memory, GgmlType type, int64_t n_cols);
// Unpacks rows [row_begin, row_begin + kPanelRows) (clipped at n_rows) into the panel.
void fill_int_panel(const WeightMatrix& w, int64_t row_begin, const IntPanel& panel);

// Activations of the integer GEMM, per token: n_cols bytes q + 128, then per sub-block the
// activation scale d (f32) and, with has_min, the scaled sum of the sub-block (f32).
struct IntActivations {
    const uint8_t* u8;  // [n_tokens][n_cols]
    const float* d;     // [n_tokens][n_sub]
    const float* sum;   // [n_tokens][n_sub] or null
    int64_t n_cols;
    int64_t n_sub;
};
std::size_t int_activations_bytes(GgmlType weight_type, int64_t n_cols, int64_t n_tokens);
// Converts tokens [t_begin, t_end) of act into memory laid out for all n_tokens.
IntActivations int_activations_at(std::byte* memory, GgmlType weight_type, int64_t n_cols,
                                  int64_t n_tokens);
void fill_int_activations(GgmlType weight_type, const Activations& act, int64_t n_cols,
                          int64_t t_begin, int64_t t_end, std::byte* memory);

// Float panel (F32/F16/BF16 weights): per column k, kPanelRows f32 values (rows past the end 0).
std::size_t float_panel_bytes(int64_t n_cols);
void fill_float_panel(const WeightMatrix& w, int64_t row_begin, float* panel);

}  // namespace minfer::kernels
