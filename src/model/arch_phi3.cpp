// Phi-3 / 3.5 / 4-mini: one fused attn_qkv matrix (Q, K, V rows in that order), a fused ffn_up
// (gate rows, then up rows) into SwiGLU, neox RoPE, queries scaled before attention, a sliding
// window on every layer (phi3.attention.sliding_window, applied as in the reference outputs), and
// LongRoPE: rope_factors_long / rope_factors_short chosen by the context (decoder_graph.cpp) with
// a magnitude factor on cos and sin.
#include <cmath>

#include "model/architecture.h"
#include "model/decoder_graph.h"

namespace minfer {
namespace {

// rope.scaling.attn_factor, or for files without it what the converter (and Hugging Face's
// Phi3LongRoPEScaledRotaryEmbedding) derive from the extension of the original context:
// sqrt(1 + ln(s) / ln(original)) with s = context / original, 1 when not extended.
float longrope_attn_factor(const HParams& hp) {
    if (hp.rope_attn_factor) return *hp.rope_attn_factor;
    if (hp.n_ctx_train <= hp.n_ctx_orig || hp.n_ctx_orig < 2) return 1.0f;
    const double s = static_cast<double>(hp.n_ctx_train) / static_cast<double>(hp.n_ctx_orig);
    return static_cast<float>(
        std::sqrt(1.0 + std::log(s) / std::log(static_cast<double>(hp.n_ctx_orig))));
}

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "phi3"), {}};
    LayerConfig layer = uniform_layer_config(c.hp, RopeStyle::kNeox);
    layer.qkv_layout = QkvLayout::kFused;
    layer.gate_up_layout = GateUpLayout::kFused;
    layer.attn_scaling = AttnScaling::kQuery;
    layer.attn_window = c.hp.sliding_window;
    layer.rope.attn_factor = longrope_attn_factor(c.hp);
    c.layers.assign(static_cast<std::size_t>(c.hp.n_layer), layer);
    return c;
}

}  // namespace

const Architecture& phi3_architecture() {
    static const Architecture arch{"phi3", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
