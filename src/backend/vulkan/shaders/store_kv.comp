#version 450
// Cache layer (K, V) at slot kv_slots[t] = (k row t, v row t), rounded to the cache's type: f16
// (F16_CACHE, two values a word; widths are even), q8_0 (Q8_CACHE: blocks of 32 as ggml's
// quantize_row_q8_0 makes them, 34 bytes each; widths are multiples of 64, so that a pair of
// blocks is 17 whole words) or f32. One invocation per unit of a token's K and V row: a pair of
// values, or a pair of q8_0 blocks.

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

#ifdef Q8_CACHE
const uint UNIT = 64u;  // values an invocation stores

float source(uint i, bool is_k) {
    return is_k ? k[i] : v[i];
}

// Blocks 2i and 2i + 1 of the row: d = max |x| / 127 (stored as f16), q = roundf(x / d).
void store(uint t, uint i, uint width, bool is_k) {
    const uint slot = uint(inputs[p.kv_slots + t]);
    uint words[17];
    for (uint w = 0u; w < 17u; ++w) words[w] = 0u;
    for (uint half_ = 0u; half_ < 2u; ++half_) {
        const uint src = t * width + 64u * i + 32u * half_;
        float amax = 0.0;
        for (uint j = 0u; j < 32u; ++j) amax = max(amax, abs(source(src + j, is_k)));
        const float d = amax / 127.0;
        const float id = d != 0.0 ? 1.0 / d : 0.0;
        const uint at = 34u * half_;  // byte of this block within the pair
        const uint d16 = packHalf2x16(vec2(d, 0.0)) & 0xFFFFu;
        words[at >> 2] |= d16 << (8u * (at & 3u));  // at is 0 or 34: never straddles
        for (uint j = 0u; j < 32u; ++j) {
            const float x0 = source(src + j, is_k) * id;
            const int q = int(sign(x0) * floor(abs(x0) + 0.5));  // roundf: half away from zero
            const uint b = at + 2u + j;
            words[b >> 2] |= (uint(q) & 0xFFu) << (8u * (b & 3u));
        }
    }
    const uint first = (slot * (width / 32u) * 34u + 68u * i) / 4u;
    for (uint w = 0u; w < 17u; ++w) {
        if (is_k) k_cache[first + w] = words[w];
        else v_cache[first + w] = words[w];
    }
}
#else
const uint UNIT = 2u;

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
#endif

void main() {
    const uint id = flat_index();
    const uint k_pairs = p.k_width / UNIT, v_pairs = p.v_width / UNIT;
    const uint per_token = k_pairs + v_pairs;
    if (id >= p.n_tokens * per_token) return;
    const uint t = id / per_token, i = id % per_token;
    if (i < k_pairs) store(t, i, p.k_width, true);
    else store(t, i - k_pairs, p.v_width, false);
}
