#version 450
// Attention of query head h of token t over the positions its sequence has cached (the cache f32,
// f16 with F16_CACHE, q8_0 with Q8_CACHE): one
// workgroup per (token, head), over the positions first .. pos (first = pos - window + 1 with a
// window) in chunks of 64: invocation i scores position base + i (scale * q·k, soft-capped), then
// every invocation folds the chunk into a running maximum, sum and weighted sum of V (online
// softmax) for the output values it owns (d = lid, lid + 64, ...: head_dim_v <= 256). The order
// of every sum is fixed: the same bits on every run and whatever else is in the batch.
// Positions are found through the sequence's block table (model/graph.h: the paged KV cache).

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
layout(std430, binding = 1) writeonly buffer Output { float dst[]; };
layout(std430, binding = 2) readonly buffer Inputs { int inputs[]; };
layout(std430, binding = 3) readonly buffer KCache { uint k_cache[]; };
layout(std430, binding = 4) readonly buffer VCache { uint v_cache[]; };

layout(push_constant) uniform Shape {
    uint n_head;
    uint n_head_kv;
    uint head_dim_k;
    uint head_dim_v;
    float scale;
    float softcap;  // 0: none
    uint window;    // 0: every earlier position
    uint block_size;
    uint positions;     // offsets in inputs
    uint sequence;
    uint table_begin;
    uint table_blocks;
} p;

#ifdef Q8_CACHE
// Value i of a q8_0 cache layer (rows of whole 34-byte blocks of 32): d (f16) times q.
uint cache_byte(uint o, bool is_k) {
    return ((is_k ? k_cache[o >> 2] : v_cache[o >> 2]) >> (8u * (o & 3u))) & 0xFFu;
}
float q8_value(uint i, bool is_k) {
    const uint block = (i >> 5) * 34u;
    const float d = unpackHalf2x16(cache_byte(block, is_k) | (cache_byte(block + 1u, is_k) << 8)).x;
    return float(bitfieldExtract(int(cache_byte(block + 2u + (i & 31u), is_k)), 0, 8)) * d;
}
#endif

float k_value(uint i) {
#if defined(Q8_CACHE)
    return q8_value(i, true);
#elif defined(F16_CACHE)
    const vec2 pair = unpackHalf2x16(k_cache[i >> 1]);
    return (i & 1u) == 0u ? pair.x : pair.y;
#else
    return uintBitsToFloat(k_cache[i]);
#endif
}
float v_value(uint i) {
#if defined(Q8_CACHE)
    return q8_value(i, false);
#elif defined(F16_CACHE)
    const vec2 pair = unpackHalf2x16(v_cache[i >> 1]);
    return (i & 1u) == 0u ? pair.x : pair.y;
#else
    return uintBitsToFloat(v_cache[i]);
#endif
}

shared float q_head[256];
shared float scores[64];
shared uint slots[64];

void main() {
    const uint g = group_index();
    const uint t = g / p.n_head, h = g % p.n_head;
    const uint lid = gl_LocalInvocationID.x;
    const uint kv_head = h / (p.n_head / p.n_head_kv);
    const uint k_width = p.n_head_kv * p.head_dim_k, v_width = p.n_head_kv * p.head_dim_v;
    const uint q_row = t * p.n_head * p.head_dim_k + h * p.head_dim_k;
    for (uint d = lid; d < p.head_dim_k; d += 64u) q_head[d] = q[q_row + d];
    barrier();

    const uint pos = uint(inputs[p.positions + t]);
    const uint first = p.window > 0u && pos + 1u > p.window ? pos + 1u - p.window : 0u;
    const uint seq = uint(inputs[p.sequence + t]);
    const uint table = uint(inputs[p.table_begin + seq]);

    float running_max = -1.0 / 0.0, running_sum = 0.0;
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    for (uint base = first; base <= pos; base += 64u) {
        const uint position = base + lid;
        if (position <= pos) {
            const uint block = uint(inputs[p.table_blocks + table + position / p.block_size]);
            const uint slot = block * p.block_size + position % p.block_size;
            const uint k_row = slot * k_width + kv_head * p.head_dim_k;
            float dot = 0.0;
            for (uint d = 0u; d < p.head_dim_k; ++d) dot += q_head[d] * k_value(k_row + d);
            float score = p.scale * dot;
            if (p.softcap > 0.0) score = p.softcap * tanh(clamp(score / p.softcap, -15.0, 15.0));
            scores[lid] = score;
            slots[lid] = slot;
        }
        barrier();
        const uint n = min(64u, pos - base + 1u);
        float chunk_max = scores[0];
        for (uint j = 1u; j < n; ++j) chunk_max = max(chunk_max, scores[j]);
        const float new_max = max(running_max, chunk_max);
        const float correction = exp(running_max - new_max);
        running_sum *= correction;
        for (uint m = 0u; m < 4u; ++m) acc[m] *= correction;
        for (uint j = 0u; j < n; ++j) {
            const float w = exp(scores[j] - new_max);
            running_sum += w;
            const uint v_row = slots[j] * v_width + kv_head * p.head_dim_v;
            for (uint m = 0u; m < 4u; ++m) {
                const uint d = lid + 64u * m;
                if (d < p.head_dim_v) acc[m] += w * v_value(v_row + d);
            }
        }
        running_max = new_max;
        barrier();
    }
    const uint out_row = t * p.n_head * p.head_dim_v + h * p.head_dim_v;
    for (uint m = 0u; m < 4u; ++m) {
        const uint d = lid + 64u * m;
        if (d < p.head_dim_v) dst[out_row + d] = acc[m] / running_sum;
    }
}
