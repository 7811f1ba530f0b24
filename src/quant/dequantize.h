#pragma once
// Dequantization: rows of ggml blocks back to f32, bit-exact with ggml's reference C code (the
// same float operations in the same order). A row of n values of type T is n / block_size(T)
// blocks laid end to end; the source may sit at any address (blocks are copied out before use).

#include <cstdint>

#include "gguf/ggml_type.h"
#include "quant/block_types.h"

namespace minfer {

// True for the types dequantize_row handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS, TQ1_0, TQ2_0.
bool can_dequantize(GgmlType type);

// Writes n floats to dst from the n / block_size(type) blocks at src. Throws UnsupportedError for
// a type can_dequantize rejects, and Error when n is negative or not a multiple of the block size.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// The per-type routines behind dequantize_row (n a multiple of the block size, unchecked).
void dequantize_row_f16(const void* src, float* dst, int64_t n);
void dequantize_row_bf16(const void* src, float* dst, int64_t n);
void dequantize_row_q4_0(const void* src, float* dst, int64_t n);
void dequantize_row_q4_1(const void* src, float* dst, int64_t n);
void dequantize_row_q5_0(const void* src, float* dst, int64_t n);
void dequantize_row_q5_1(const void* src, float* dst, int64_t n);
void dequantize_row_q8_0(const void* src, float* dst, int64_t n);
void dequantize_row_q2_K(const void* src, float* dst, int64_t n);
void dequantize_row_q3_K(const void* src, float* dst, int64_t n);
void dequantize_row_q4_K(const void* src, float* dst, int64_t n);
void dequantize_row_q5_K(const void* src, float* dst, int64_t n);
void dequantize_row_q6_K(const void* src, float* dst, int64_t n);
void dequantize_row_q8_K(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_nl(const void* src, float* dst, int64_t n);
void dequantize_row_iq4_xs(const void* src, float* dst, int64_t n);
void dequantize_row_tq1_0(const void* src, float* dst, int64_t n);
void dequantize_row_tq2_0(const void* src, float* dst, int64_t n);

}  // namespace minfer
