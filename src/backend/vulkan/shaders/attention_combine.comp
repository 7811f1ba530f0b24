#version 450
// After attention.comp's SPLIT pass: for each (token, head), one workgroup merges the states of
// the token's splits in order (attention_common.glsl, the single pass's arithmetic) and writes
// the output, acc / s; invocation i owns the values d = i, i + 64, ...

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Partials { float partials[]; };  // attention.comp's
layout(std430, binding = 1) writeonly buffer Output { float dst[]; };
layout(std430, binding = 2) readonly buffer Inputs { int inputs[]; };

#include "attention_common.glsl"

void main() {
    const uint lid = gl_LocalInvocationID.x;
    const uint g = group_index();
    const uint t = g / p.n_head;
    if (t >= p.n_tokens) return;  // the whole workgroup
    const uint pos = uint(inputs[p.positions + t]);
    float m, s, acc[4];
    for (uint j = 0u; j < splits_of(pos); ++j) {
        const uint at = (g * p.n_splits + j) * (2u + p.head_dim_v);
        float acc2[4];
        for (uint i = 0u; i < 4u; ++i) {
            const uint d = lid + 64u * i;
            acc2[i] = d < p.head_dim_v ? partials[at + 2u + d] : 0.0;
        }
        merge_state(j, m, s, acc, partials[at], partials[at + 1u], acc2);
    }
    const uint dst_at = g * p.head_dim_v;
    for (uint i = 0u; i < 4u; ++i) {
        const uint d = lid + 64u * i;
        if (d < p.head_dim_v) dst[dst_at + d] = acc[i] / s;
    }
}
