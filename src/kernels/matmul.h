#pragma once
// Y = W · X for a weight matrix of any supported ggml type, straight out of its blocks.
//
// x is [n_tokens][n_cols] row-major f32, y is [n_tokens][n_rows]: y[t][r] = dot(W row r, x row t).
// As in ggml, x is first converted to W's activation type (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1
// for Q4_1/Q5_1, Q8_K for the K-quants, IQ4_XS and the ternary types; rounded to f16 for F16
// weights and to bf16 for BF16), so that the result matches llama.cpp's up to summation order.
// One token takes the GEMV path (memory-bound: rows split across threads, each weight byte read
// once); 16 tokens or more take the GEMM path (16 rows at a time unpacked into a panel that every
// token then reuses); in between, GEMV runs once per token where a SIMD GEMV kernel exists.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "gguf/ggml_type.h"

namespace minfer {

struct WeightMatrix {
    GgmlType type;
    int64_t n_cols;  // ne[0]: row length in elements, a multiple of the type's block size
    int64_t n_rows;  // ne[1]
    std::span<const std::byte> data;  // row r at r * row_size(type, n_cols)
};

// Working memory of matmul (quantized activations, per-thread weight panels). One per inference
// context: it grows to the largest call it has seen and is reused, never shrunk.
class MatmulScratch {
  public:
    // A 64-byte aligned region of at least `bytes` bytes; invalidates earlier regions.
    std::byte* reserve(std::size_t bytes);
    std::size_t capacity() const { return buffer_.size() * sizeof(Line); }

  private:
    struct alignas(64) Line {
        std::byte bytes[64];
    };
    std::vector<Line> buffer_;
};

// True if matmul handles weights of this type.
bool matmul_supports(GgmlType type);

// Throws UnsupportedError for a type it does not handle and UsageError for inconsistent shapes
// (n_cols not a multiple of the block size, data shorter than n_rows rows, n_tokens < 0).
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch);

}  // namespace minfer
