#pragma once
// The non-matmul operations of a transformer forward pass, on f32 rows, with ggml's arithmetic
// (so that minfer's activations track llama.cpp's): where ggml accumulates in double, so do we.

#include <cmath>
#include <cstdint>
#include <span>

#include "kernels/matmul.h"
#include "kernels/rope_style.h"
#include "kernels/vector_ops.h"  // row conversions f32 <-> f16

namespace minfer {

// y = x * 1 / sqrt(mean(x^2) + eps) (* weight[i] when weight is not null). The sum of squares of
// f32 products is accumulated in double, as ggml does (in several double lanes with SIMD: only
// the order of the double additions differs). y may alias x.
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps);

struct RopeConfig {
    RopeStyle style = RopeStyle::kNormal;
    int64_t head_dim = 0;  // values per head
    int64_t n_dims = 0;    // leading values of each head that rotate (<= head_dim, even); the rest
                           // pass through unchanged
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;              // linear scaling: positions are multiplied by it
    const float* freq_factors = nullptr;  // optional [n_dims / 2]: pair i's theta is divided by it
                                          // (rope_freqs.weight, Llama 3.1's scaling; LongRoPE)
    float attn_factor = 1.0f;  // cos and sin are multiplied by it (ggml's mscale; LongRoPE)
};

// Rotates x = [n_tokens][n_heads][head_dim] in place; token t is at position positions[t]. For
// pair i: theta = positions[t] * freq_scale * freq_base^(-2i / n_dims), computed as ggml does
// (theta_scale = powf(base, -2 / n_dims) multiplied in once per pair). Throws UsageError for an
// inconsistent config.
void rope(float* x, int64_t n_tokens, int64_t n_heads, std::span<const int32_t> positions,
          const RopeConfig& config);

// In place: x[i] = softmax(x * scale + mask)[i] over n values; mask (may be null) holds 0 or
// -INFINITY (or any additive bias). A row masked entirely becomes all zeros.
void softmax(float* x, int64_t n, float scale = 1.0f, const float* mask = nullptr);

// log(sum(exp(x[i]))) over n values (vectorized: the log-probabilities of a 152k-word vocabulary
// for every streamed token). -INFINITY when every value is.
double logsumexp(const float* x, int64_t n);

// The index of the first x[i] > threshold (a NaN never is), or n: a sampler's scan of the
// logits for the few that beat its worst candidate so far.
int64_t first_above(const float* x, int64_t n, float threshold);

// y = x / (1 + exp(-x)). y may alias x.
void silu(const float* x, float* y, int64_t n);
// GELU, tanh approximation, through ggml's f16 table: y = f16(gelu(f16(x))) for |x| < 10,
// 0 below -10 and x above 10. y may alias x.
void gelu(const float* x, float* y, int64_t n);
// out = silu(gate) * up. out may alias gate or up.
void swiglu(const float* gate, const float* up, float* out, int64_t n);

// Gemma 2's soft-capping of attention scores and final logits, cap * tanh(x / cap), in ggml's
// order of its three ops (x * (1 / cap), tanh, * cap) so that the roundings are the reference's.
inline float soft_cap(float x, float cap) {
    return std::tanh(x * (1.0f / cap)) * cap;
}
// soft_cap over a row in place; vectorized (tanh a few ulp from the C library's, not bit for bit:
// the final logits, 256000 of them for Gemma 2, took 2.6 % of a decode step one at a time).
void soft_cap_row(float* x, int64_t n, float cap);

// out = a + b, out = a * b (elementwise; out may alias a or b).
void add(const float* a, const float* b, float* out, int64_t n);
void mul(const float* a, const float* b, float* out, int64_t n);

// Embedding lookup: row ids[i] of `table` (any type dequantize_row handles) into
// out[i * n_cols ...]. Throws UsageError naming the id if one is outside [0, n_rows).
void get_rows(const WeightMatrix& table, std::span<const int32_t> ids, float* out);

}  // namespace minfer
