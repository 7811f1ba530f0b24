#pragma once
// Quantization: f32 rows to ggml blocks. The 32-value types and the activation formats produce
// exactly the bytes of ggml's reference C quantizers; the K-quants and IQ4_NL follow ggml's
// algorithms without an importance matrix (what `llama-quantize` does without --imatrix).
// Every input is accepted: non-finite values give defined (if meaningless) blocks, never UB.

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "quant/block_types.h"

namespace minfer {

// True for the types quantize_row produces: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K,
// Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL (plus F32, F16 and BF16, which are plain conversions).
bool can_quantize(GgmlType type);

// Quantizes n values (a multiple of the type's block size) into row_size(type, n) bytes at dst,
// which may sit at any address. Throws UnsupportedError for a type can_quantize rejects and
// Error for a bad n.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// Quantizes n_rows rows of n_per_row values, row after row; returns the bytes written
// (n_rows * row_size(type, n_per_row)).
std::size_t quantize_rows(GgmlType type, const float* src, void* dst, int64_t n_rows,
                          int64_t n_per_row);

// Activation formats, quantized on the fly before integer dot products (n a multiple of 32 or
// 256; unchecked). Q8_0: d = amax / 127, q = round(x / d) (half away from zero). Q8_1: as Q8_0
// plus s = d * sum(q). Q8_K: d = max / -127 (max the value of largest magnitude), q rounded to
// nearest even, bsums = sums of each 16 quants.
void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n);
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n);
void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n);

}  // namespace minfer
