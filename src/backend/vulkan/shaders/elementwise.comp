#version 450
// The in-place element-wise ops over dst [rows][width] (n = rows * width values), one invocation
// per value: what each computes is model/graph.h's definition (OP: 0 add, 1 swiglu, 2 geglu,
// 3 scale, 4 softcap, 5 add_bias).

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) buffer Values { float dst[]; };
layout(std430, binding = 1) readonly buffer Other { float src[]; };  // add, swiglu, geglu: [n]; add_bias: [width]

layout(push_constant) uniform Shape {
    uint n;
    uint width;
    uint op;
    float factor;
} p;

void main() {
    const uint i = flat_index();
    if (i >= p.n) return;
    const float v = dst[i];
    float r;
    switch (p.op) {
        case 0u: r = v + src[i]; break;
        case 1u: r = v / (1.0 + exp(-v)) * src[i]; break;
        case 2u: {
            // GELU's tanh approximation, as the reference computes it (tanh of a clamped
            // argument: GLSL's tanh of a large one may be NaN on some drivers).
            const float a = clamp(0.7978845608028654 * (v + 0.044715 * v * v * v), -15.0, 15.0);
            r = 0.5 * v * (1.0 + tanh(a)) * src[i];
            break;
        }
        case 3u: r = v * p.factor; break;
        case 4u: r = p.factor * tanh(clamp(v / p.factor, -15.0, 15.0)); break;
        default: r = v + src[i % p.width]; break;
    }
    dst[i] = r;
}
