// Gemma 2: the Gemma block (gemma_common.h) with attention-logit soft-capping, a sliding window on
// the even layers (counting from 0), and final-logit soft-capping; tied output.
#include "model/architecture.h"
#include "model/decoder_graph.h"
#include "model/gemma_common.h"

namespace minfer {
namespace {

constexpr int64_t kLayers27B = 46;

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "gemma2"), {}};
    const ArchKeys keys(meta, "gemma2");
    // llama.cpp's defaults where a key is missing.
    const int64_t window = keys.optional_int("attention.sliding_window", 4096, 1, int64_t{1} << 24);
    const auto attn_softcap =
        static_cast<float>(keys.optional_number("attn_logit_softcapping", 50.0, 1e-3, 1e6));
    c.final_softcap =
        static_cast<float>(keys.optional_number("final_logit_softcapping", 30.0, 1e-3, 1e6));
    c.embedding_scale = gemma_embedding_scale(c.hp);
    LayerConfig layer = gemma_layer_config(c.hp, kLayers27B);
    layer.attn_softcap = attn_softcap;
    for (int64_t i = 0; i < c.hp.n_layer; ++i) {
        layer.attn_window = i % 2 == 0 ? window : 0;
        c.layers.push_back(layer);
    }
    return c;
}

}  // namespace

const Architecture& gemma2_architecture() {
    static const Architecture arch{"gemma2", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
