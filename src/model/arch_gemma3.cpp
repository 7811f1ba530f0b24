// Gemma 3: the Gemma block (gemma_common.h) with per-head Q/K norms; five sliding-window layers for
// each global one (layer i is global when (i + 1) % 6 == 0). Sliding layers use RoPE base 10,000
// unscaled; global ones gemma3.rope.freq_base with the file's RoPE scaling (linear, factor 8 in
// the 4B-27B models). No soft-capping; tied output.
#include "model/architecture.h"
#include "model/decoder_graph.h"
#include "model/gemma_common.h"

namespace minfer {
namespace {

constexpr int64_t kLayers27B = 62;
constexpr int64_t kSlidingPattern = 6;
constexpr float kSlidingRopeBase = 10000.0f;

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "gemma3"), {}};
    const ArchKeys keys(meta, "gemma3");
    const int64_t window = keys.required_int("attention.sliding_window", 1, int64_t{1} << 24);
    c.embedding_scale = gemma_embedding_scale(c.hp);
    LayerConfig layer = gemma_layer_config(c.hp, kLayers27B);
    layer.qk_norm = true;
    for (int64_t i = 0; i < c.hp.n_layer; ++i) {
        const bool global = (i + 1) % kSlidingPattern == 0;
        layer.attn_window = global ? 0 : window;
        layer.rope.freq_base = global ? c.hp.rope_freq_base : kSlidingRopeBase;
        layer.rope.freq_scale = global ? c.hp.rope_freq_scale : 1.0f;
        c.layers.push_back(layer);
    }
    return c;
}

}  // namespace

const Architecture& gemma3_architecture() {
    static const Architecture arch{"gemma3", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
