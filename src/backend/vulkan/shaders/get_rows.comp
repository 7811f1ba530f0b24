#version 450
// dst[t][c] = row tokens[t] of the table W [n_vocab][width] in its GGUF type, dequantized: one
// workgroup per token, its invocations over the row's values. A table larger than the device
// binds at once comes in windows of n_window rows from row_base, one dispatch each: a token
// whose row is in another window is left to that window's dispatch.

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer Inputs { int inputs[]; };
layout(std430, binding = 2) writeonly buffer Output { float dst[]; };

layout(push_constant) uniform Shape {
    uint n_tokens;
    uint width;
    uint row_bytes;
    uint tokens;  // offset of the token ids in inputs
    uint row_base;
    uint n_window;
} p;

#define VALUES_ONLY
#include "weight_types.glsl"

void main() {
    const uint t = group_index();
    if (t >= p.n_tokens) return;
    const uint id = uint(inputs[p.tokens + t]);
    if (id < p.row_base || id - p.row_base >= p.n_window) return;
    const uint row = (id - p.row_base) * p.row_bytes;
    for (uint c = gl_LocalInvocationID.x; c < p.width; c += 64u)
        dst[t * p.width + c] = block_value(row + (c / QK) * BLOCK_BYTES, c % QK);
}
