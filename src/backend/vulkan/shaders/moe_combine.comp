#version 450
// dst[t][i] = sum over slots j in order of weights[t][j] * experts[t][j][i]. One invocation per
// output value.

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Experts { float experts[]; };
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };
layout(std430, binding = 2) writeonly buffer Output { float dst[]; };

layout(push_constant) uniform Shape {
    uint n_tokens;
    uint width;
    uint k;
} p;

void main() {
    const uint id = flat_index();
    if (id >= p.n_tokens * p.width) return;
    const uint t = id / p.width, i = id % p.width;
    float sum = 0.0;
    for (uint j = 0u; j < p.k; ++j) sum += weights[t * p.k + j] * experts[(t * p.k + j) * p.width + i];
    dst[id] = sum;
}
