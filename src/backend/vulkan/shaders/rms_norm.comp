#version 450
// y = x / sqrt(mean(x^2) + eps) * weight over groups of n values: rows (RmsNorm, n = width) or
// heads (HeadRmsNorm, n = head_dim, in place: x and y bind the same buffer). One workgroup per
// group; the squares summed in a fixed order (per invocation, then a shared-memory tree).

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Input { float x[]; };
layout(std430, binding = 1) readonly buffer Weight { float weight[]; };
layout(std430, binding = 2) buffer Output { float y[]; };

layout(push_constant) uniform Shape {
    uint n_groups;
    uint n;
    float eps;
} p;

shared float partial[64];

void main() {
    const uint g = group_index();
    if (g >= p.n_groups) return;
    const uint lid = gl_LocalInvocationID.x;
    const uint base = g * p.n;
    float sum = 0.0;
    for (uint i = lid; i < p.n; i += 64u) sum += x[base + i] * x[base + i];
    partial[lid] = sum;
    barrier();
    for (uint h = 32u; h > 0u; h >>= 1) {
        if (lid < h) partial[lid] += partial[lid + h];
        barrier();
    }
    const float scale = 1.0 / sqrt(partial[0] / float(p.n) + p.eps);
    for (uint i = lid; i < p.n; i += 64u) y[base + i] = x[base + i] * scale * weight[i];
}
