#version 450
// RoPE over dst [n_tokens][n_heads][head_dim] in place: pair i (< n_dims / 2) of every head of
// token t turns by position[t] * freq_scale * freq_base^(-2i / n_dims) / factor[i], scaled by
// attn_factor. Normal style pairs values (2i, 2i + 1), neox style (i, i + n_dims / 2). One
// invocation per (token, head, pair).

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Values { float dst[]; };
layout(std430, binding = 1) readonly buffer Inputs { int inputs[]; };
layout(std430, binding = 2) readonly buffer Factors { float factors[]; };

layout(push_constant) uniform Shape {
    uint n_tokens;
    uint n_heads;
    uint head_dim;
    uint n_dims;
    uint neox;
    uint has_factors;
    uint positions;  // offset of the positions in inputs
    float freq_base;
    float freq_scale;
    float attn_factor;
} p;

void main() {
    const uint half_dims = p.n_dims / 2u;
    const uint id = flat_index();
    if (id >= p.n_tokens * p.n_heads * half_dims) return;
    const uint i = id % half_dims;
    const uint head = id / half_dims;  // token * n_heads + head
    const uint t = head / p.n_heads;
    float theta = float(inputs[p.positions + t]) * p.freq_scale *
                  pow(p.freq_base, -2.0 * float(i) / float(p.n_dims));
    if (p.has_factors != 0u) theta /= factors[i];
    const float c = cos(theta) * p.attn_factor, s = sin(theta) * p.attn_factor;
    const uint base = head * p.head_dim;
    const uint a = base + (p.neox != 0u ? i : 2u * i);
    const uint b = base + (p.neox != 0u ? i + half_dims : 2u * i + 1u);
    const float x0 = dst[a], x1 = dst[b];
    dst[a] = x0 * c - x1 * s;
    dst[b] = x0 * s + x1 * c;
}
