#version 450
// The router of a mixture of experts, one invocation per token over its logits [n_expert]:
// the softmax probabilities, then (MODE 0, MoeRoute) the ids of the k most probable experts,
// most probable first, the lower id on a tie; or (MODE 1, MoeWeights) the probabilities of the
// ids given, divided by their sum. n_expert <= 256.

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Logits { float logits[]; };
layout(std430, binding = 1) buffer Ids { int ids[]; };
layout(std430, binding = 2) writeonly buffer Weights { float weights[]; };

layout(push_constant) uniform Shape {
    uint n_tokens;
    uint n_expert;
    uint k;
    uint mode;
} p;

float probs[256];

void main() {
    const uint t = gl_GlobalInvocationID.x;
    if (t >= p.n_tokens) return;
    const uint base = t * p.n_expert;
    float max_logit = logits[base];
    for (uint e = 1u; e < p.n_expert; ++e) max_logit = max(max_logit, logits[base + e]);
    float sum = 0.0;
    for (uint e = 0u; e < p.n_expert; ++e) {
        probs[e] = exp(logits[base + e] - max_logit);
        sum += probs[e];
    }
    for (uint e = 0u; e < p.n_expert; ++e) probs[e] /= sum;
    if (p.mode == 0u) {
        for (uint j = 0u; j < p.k; ++j) {
            int best = -1;
            for (uint e = 0u; e < p.n_expert; ++e) {
                bool taken = false;
                for (uint i = 0u; i < j; ++i) taken = taken || ids[t * p.k + i] == int(e);
                if (!taken && (best < 0 || probs[e] > probs[uint(best)])) best = int(e);
            }
            ids[t * p.k + j] = best;
        }
    } else {
        float picked = 0.0;
        for (uint j = 0u; j < p.k; ++j) picked += probs[uint(ids[t * p.k + j])];
        for (uint j = 0u; j < p.k; ++j) weights[t * p.k + j] = probs[uint(ids[t * p.k + j])] / picked;
    }
}
