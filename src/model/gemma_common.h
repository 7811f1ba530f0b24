#pragma once
// What Gemma 2 and Gemma 3 share: embeddings scaled by sqrt(n_embd), RMS norms after the attention
// and feed-forward blocks too, a GELU-gated feed-forward, neox RoPE, and queries scaled before
// attention, by 1/sqrt(n_embd / n_head) for the 27B models (which llama.cpp tells by their layer
// count) and by 1/sqrt(head size) for the others.

#include <cmath>

#include "model/architecture.h"

namespace minfer {

inline LayerConfig gemma_layer_config(const HParams& hp, int64_t n_layer_27b) {
    LayerConfig layer = uniform_layer_config(hp, RopeStyle::kNeox);
    layer.norms = NormPlacement::kPreAndPost;
    layer.ffn_act = FfnActivation::kGeluTanh;
    layer.attn_scaling = AttnScaling::kQuery;
    const int64_t scale_width = hp.n_layer == n_layer_27b ? hp.n_embd / hp.n_head : hp.head_dim_k;
    layer.attn_scale = 1.0f / std::sqrt(static_cast<float>(scale_width));
    return layer;
}

inline float gemma_embedding_scale(const HParams& hp) {
    return std::sqrt(static_cast<float>(hp.n_embd));
}

}  // namespace minfer
