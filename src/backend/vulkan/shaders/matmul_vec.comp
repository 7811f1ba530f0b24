#version 450
// y[s][r] = sum over c of W[r][c] * x[s][c]: one workgroup per (weight row r, input row s), its
// 64 invocations striding over the row's blocks in a fixed order, their sums added in shared
// memory in a fixed tree (the same bits on every run). (Tiles of 8 input rows a workgroup, each
// block read once for them, were tried on the H200: Qwen2 0.5B Q4_0 prompts 608 -> 653 tokens/s,
// but F16 decoding 227 -> 149: not kept.) W is [n_out][n_in] in its GGUF type
// (TYPE_X at build time, weight_types.glsl), row r at byte r * row_bytes; x [n_rows][n_in] and
// y [n_rows][y_stride] f32, row r of the binding written at column row_base + r: a matrix larger
// than the device binds at once comes in windows of rows, one dispatch each (row_base 0 and
// y_stride n_out otherwise). Rows beyond the x dimension's workgroup limit come in z:
// r = group.x + group.z * groups.x.
//
// With ROW_PER_INVOCATION (the variant for CPU devices such as lavapipe, which run a workgroup's
// invocations as SIMD lanes and pay for every barrier), each invocation computes one (row r,
// input row s) alone, over its blocks in order: 64 rows a workgroup, no shared memory. The sums
// then differ from the workgroup variant's in rounding only.
//
// With MOE, a 3-D expert tensor [n_expert][n_out][n_in] (expert e at byte e * expert_bytes) and
// the experts each (token t, slot j) picked, s = t * k + j: y[s] = x · W_e^T for e = experts[s],
// x being row t of the input, or its row s when per_slot (the down projection's per-slot input).

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Weights { uint weights[]; };
layout(std430, binding = 1) readonly buffer Input { float x[]; };
layout(std430, binding = 2) writeonly buffer Output { float y[]; };
#ifdef MOE
layout(std430, binding = 3) readonly buffer Experts { int experts[]; };
#endif

layout(push_constant) uniform Shape {
    uint n_in;
    uint n_out;
    uint n_rows;
    uint row_bytes;
    uint k;             // MOE: slots per token
    uint per_slot;      // MOE: 1 if x has a row per slot
    uint expert_bytes;  // MOE: bytes of one expert's matrix
    uint row_base;      // the first row of this window of the matrix
    uint y_stride;      // values of an output row: the whole matrix's rows
} p;

#include "weight_types.glsl"

// Where weight row r for input row s starts (bytes), and where input row s starts (values).
uint row_start(uint r, uint s) {
#ifdef MOE
    return uint(experts[s]) * p.expert_bytes + r * p.row_bytes;
#else
    return r * p.row_bytes;
#endif
}
uint input_start(uint s) {
#ifdef MOE
    return (p.per_slot != 0u ? s : s / p.k) * p.n_in;
#else
    return s * p.n_in;
#endif
}

#ifdef ROW_PER_INVOCATION
void main() {
    const uint r = (gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x) * 64u +
                   gl_LocalInvocationID.x;
    const uint s = gl_WorkGroupID.y;
    if (r >= p.n_out) return;
    const uint row = row_start(r, s), xo = input_start(s);
    float sum = 0.0;
    for (uint b = 0u; b < p.n_in / QK; ++b) sum += block_dot(row + b * BLOCK_BYTES, xo + b * QK);
    y[s * p.y_stride + p.row_base + r] = sum;
}
#else
shared float partial[64];

void main() {
    const uint r = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
    const uint s = gl_WorkGroupID.y;
    if (r >= p.n_out) return;  // the whole workgroup: r is the same for all its invocations
    const uint lid = gl_LocalInvocationID.x;
    const uint row = row_start(r, s), xo = input_start(s);
    float sum = 0.0;
    for (uint b = lid; b < p.n_in / QK; b += 64u) sum += block_dot(row + b * BLOCK_BYTES, xo + b * QK);
    partial[lid] = sum;
    barrier();
    for (uint h = 32u; h > 0u; h >>= 1) {
        if (lid < h) partial[lid] += partial[lid + h];
        barrier();
    }
    if (lid == 0u) y[s * p.y_stride + p.row_base + r] = partial[0];
}
#endif
