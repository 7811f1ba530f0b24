#version 450
// dst[i] = src[output_rows[i]]: the rows whose logits are wanted. One invocation per value.

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Input { float src[]; };
layout(std430, binding = 1) readonly buffer Inputs { int inputs[]; };
layout(std430, binding = 2) writeonly buffer Output { float dst[]; };

layout(push_constant) uniform Shape {
    uint n_rows;
    uint width;
    uint output_rows;  // offset in inputs
} p;

void main() {
    const uint id = flat_index();
    if (id >= p.n_rows * p.width) return;
    const uint i = id / p.width, c = id % p.width;
    dst[id] = src[uint(inputs[p.output_rows + i]) * p.width + c];
}
