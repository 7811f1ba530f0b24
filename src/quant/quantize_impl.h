#pragma once
// Internal to src/quant: the per-type block quantizers behind quantize_row (quantize.cpp holds the
// table from type to quantizer).

#include <cstdint>

#include "quant/block_io.h"

namespace minfer::quant_detail {

// One block from its values at x. Legacy 32-value blocks (quantize_legacy.cpp): exactly ggml's
// reference bytes.
block_q4_0 quantize_block_q4_0(const float* x);
block_q4_1 quantize_block_q4_1(const float* x);
block_q5_0 quantize_block_q5_0(const float* x);
block_q5_1 quantize_block_q5_1(const float* x);
block_q8_0 quantize_block_q8_0(const float* x);
block_q8_1 quantize_block_q8_1(const float* x);

// K-quants, 256 values (quantize_k.cpp).
block_q2_K quantize_block_q2_K(const float* x);
block_q3_K quantize_block_q3_K(const float* x);
block_q4_K quantize_block_q4_K(const float* x);
block_q5_K quantize_block_q5_K(const float* x);
block_q6_K quantize_block_q6_K(const float* x);
block_q8_K quantize_block_q8_K(const float* x);

// Non-linear (quantize_iq4.cpp).
block_iq4_nl quantize_block_iq4_nl(const float* x);

// Stores quantize_block(x + i * kValues) as block i of dst for every block of the row.
template <int kValues, class QuantizeBlock>
inline void quantize_blocks(const float* x, void* dst, int64_t n, QuantizeBlock quantize_block) {
    for (int64_t i = 0; i < n / kValues; ++i) store_block(dst, i, quantize_block(x + i * kValues));
}

}  // namespace minfer::quant_detail
