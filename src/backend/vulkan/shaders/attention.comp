#version 450
// Attention of query head h of token t over the positions its sequence has cached (the cache f32,
// f16 with F16_CACHE, q8_0 with Q8_CACHE), in the splits of attention_common.glsl:
// - the single pass (default): one workgroup per (token, head) walks its splits in order and
//   merges their states as it goes;
// - SPLIT: one workgroup per (token, head, split), for passes with few (token, head) pairs and
//   long contexts (a decode step: a GPU would otherwise run a handful of workgroups); each writes
//   its split's state to partials, and attention_combine.comp merges them in the same order.
// Within a split, in chunks of 64 positions: invocation i scores position base + i (scale * q·k,
// soft-capped), then every invocation folds the chunk into a running maximum, sum and weighted
// sum of V for the output values it owns. The order of every sum is fixed: the same bits on
// every run, whatever else is in the batch, split or not. Positions are found through the
// sequence's block table (model/graph.h: the paged KV cache).

#include "common.glsl"

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Q { float q[]; };
// The output [token][head][head_dim_v]; with SPLIT, the partial states
// [token][head][split][2 + head_dim_v]: m, s, then the weighted sum of V.
layout(std430, binding = 1) writeonly buffer Output { float dst[]; };
layout(std430, binding = 2) readonly buffer Inputs { int inputs[]; };
layout(std430, binding = 3) readonly buffer KCache { uint k_cache[]; };
layout(std430, binding = 4) readonly buffer VCache { uint v_cache[]; };

#include "attention_common.glsl"

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

// The state (m, s, acc) of positions begin .. end (inclusive) of the sequence whose blocks start
// at table in the block table, for the query in q_head. Called by the whole workgroup alike.
// `precise` products and sums: the same arithmetic in the single pass and in the split one.
void attend(uint begin, uint end, uint table, uint kv_head, out float m, out float s,
            out float acc[4]) {
    const uint lid = gl_LocalInvocationID.x;
    const uint k_width = p.n_head_kv * p.head_dim_k, v_width = p.n_head_kv * p.head_dim_v;
    m = -1.0 / 0.0;
    s = 0.0;
    acc = float[4](0.0, 0.0, 0.0, 0.0);
    for (uint base = begin; base <= end; base += 64u) {
        const uint position = base + lid;
        if (position <= end) {
            const uint block = uint(inputs[p.table_blocks + table + position / p.block_size]);
            const uint slot = block * p.block_size + position % p.block_size;
            const uint k_row = slot * k_width + kv_head * p.head_dim_k;
            precise float dot = 0.0;
            for (uint d = 0u; d < p.head_dim_k; ++d) dot += q_head[d] * k_value(k_row + d);
            float score = p.scale * dot;
            if (p.softcap > 0.0) score = p.softcap * tanh(clamp(score / p.softcap, -15.0, 15.0));
            scores[lid] = score;
            slots[lid] = slot;
        }
        barrier();
        const uint n = min(64u, end - base + 1u);
        float chunk_max = scores[0];
        for (uint j = 1u; j < n; ++j) chunk_max = max(chunk_max, scores[j]);
        const float new_max = max(m, chunk_max);
        const float correction = exp(m - new_max);
        s *= correction;
        for (uint i = 0u; i < 4u; ++i) acc[i] *= correction;
        for (uint j = 0u; j < n; ++j) {
            const float w = exp(scores[j] - new_max);
            s += w;
            const uint v_row = slots[j] * v_width + kv_head * p.head_dim_v;
            for (uint i = 0u; i < 4u; ++i) {
                const uint d = lid + 64u * i;
                if (d < p.head_dim_v) {
                    precise float v = acc[i] + w * v_value(v_row + d);
                    acc[i] = v;
                }
            }
        }
        m = new_max;
        barrier();
    }
}

void main() {
    const uint lid = gl_LocalInvocationID.x;
#ifdef SPLIT
    const uint g = group_index() / p.n_splits, split = group_index() % p.n_splits;
#else
    const uint g = group_index();
#endif
    const uint t = g / p.n_head, h = g % p.n_head;
    if (t >= p.n_tokens) return;  // the whole workgroup
    const uint kv_head = h / (p.n_head / p.n_head_kv);
    const uint pos = uint(inputs[p.positions + t]);
    const uint first = first_position(pos);
    const uint table = uint(inputs[p.table_begin + uint(inputs[p.sequence + t])]);
#ifdef SPLIT
    if (split >= splits_of(pos)) return;  // the whole workgroup: this token has fewer splits
#endif
    const uint q_row = t * p.n_head * p.head_dim_k + h * p.head_dim_k;
    for (uint d = lid; d < p.head_dim_k; d += 64u) q_head[d] = q[q_row + d];
    barrier();

    float m, s, acc[4];
#ifdef SPLIT
    const uint begin = first + split * p.span;
    attend(begin, min(pos, begin + p.span - 1u), table, kv_head, m, s, acc);
    const uint dst_at = group_index() * (2u + p.head_dim_v);
    if (lid == 0u) {
        dst[dst_at] = m;
        dst[dst_at + 1u] = s;
    }
    for (uint i = 0u; i < 4u; ++i) {
        const uint d = lid + 64u * i;
        if (d < p.head_dim_v) dst[dst_at + 2u + d] = acc[i];
    }
#else
    for (uint j = 0u; j < splits_of(pos); ++j) {
        const uint begin = first + j * p.span;
        float m2, s2, acc2[4];
        attend(begin, min(pos, begin + p.span - 1u), table, kv_head, m2, s2, acc2);
        merge_state(j, m, s, acc, m2, s2, acc2);
    }
    const uint dst_at = g * p.head_dim_v;
    for (uint i = 0u; i < 4u; ++i) {
        const uint d = lid + 64u * i;
        if (d < p.head_dim_v) dst[dst_at + d] = acc[i] / s;
    }
#endif
}
