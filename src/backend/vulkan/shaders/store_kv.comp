#version 450
// Cache layer (K, V) at slot kv_slots[t] = (k row t, v row t), rounded to the cache's type: f16
// (F16_CACHE, two values a word; widths are even) or f32. One invocation per pair of values of a
// token's K and V row.

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer K { float k[]; };
layout(std430, binding = 1) readonly buffer V { float v[]; };
layout(std430, binding = 2) readonly buffer Inputs { int inputs[]; };
layout(std430, binding = 3) writeonly buffer KCache { uint k_cache[]; };
layout(std430, binding = 4) writeonly buffer VCache { uint v_cache[]; };

layout(push_constant) uniform Shape {
    uint n_tokens;
    uint k_width;
    uint v_width;
    uint kv_slots;  // offset of the slots in inputs
} p;

void store(uint t, uint i, uint width, bool is_k) {
    const uint slot = uint(inputs[p.kv_slots + t]);
#ifdef F16_CACHE
    const uint src = t * width + 2u * i;
    const uint word = (slot * width) / 2u + i;
    if (is_k) k_cache[word] = packHalf2x16(vec2(k[src], k[src + 1u]));
    else v_cache[word] = packHalf2x16(vec2(v[src], v[src + 1u]));
#else
    for (uint e = 0u; e < 2u; ++e) {
        const uint src = t * width + 2u * i + e;
        if (is_k) k_cache[slot * width + 2u * i + e] = floatBitsToUint(k[src]);
        else v_cache[slot * width + 2u * i + e] = floatBitsToUint(v[src]);
    }
#endif
}

void main() {
    const uint id = flat_index();
    const uint k_pairs = p.k_width / 2u, v_pairs = p.v_width / 2u;
    const uint per_token = k_pairs + v_pairs;
    if (id >= p.n_tokens * per_token) return;
    const uint t = id / per_token, i = id % per_token;
    if (i < k_pairs) store(t, i, p.k_width, true);
    else store(t, i - k_pairs, p.v_width, false);
}
