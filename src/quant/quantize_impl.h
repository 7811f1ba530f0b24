#pragma once
// Internal to src/quant: the per-type row quantizers behind quantize_row. Each writes n / QK
// blocks to dst (any address) from n floats at x; n is a multiple of the block size (checked by
// the caller).

#include <cstdint>

#include "quant/block_io.h"

namespace minfer::quant_detail {

// Legacy 32-value blocks (quantize_legacy.cpp): exactly ggml's reference bytes.
void quantize_q4_0(const float* x, void* dst, int64_t n);
void quantize_q4_1(const float* x, void* dst, int64_t n);
void quantize_q5_0(const float* x, void* dst, int64_t n);
void quantize_q5_1(const float* x, void* dst, int64_t n);
void quantize_q8_0(const float* x, void* dst, int64_t n);
void quantize_q8_1(const float* x, void* dst, int64_t n);

// K-quants (quantize_k.cpp, quantize_q8_k.cpp).
void quantize_q2_K(const float* x, void* dst, int64_t n);
void quantize_q3_K(const float* x, void* dst, int64_t n);
void quantize_q4_K(const float* x, void* dst, int64_t n);
void quantize_q5_K(const float* x, void* dst, int64_t n);
void quantize_q6_K(const float* x, void* dst, int64_t n);
void quantize_q8_K(const float* x, void* dst, int64_t n);

// Non-linear (quantize_iq4.cpp).
void quantize_iq4_nl(const float* x, void* dst, int64_t n);

// Stores quantize_block(x + i * kValues) as block i of dst for every block of the row.
template <int kValues, class QuantizeBlock>
inline void quantize_blocks(const float* x, void* dst, int64_t n, QuantizeBlock quantize_block) {
    for (int64_t i = 0; i < n / kValues; ++i) store_block(dst, i, quantize_block(x + i * kValues));
}

}  // namespace minfer::quant_detail
