// Qwen3: no biases, a per-head RMSNorm on Q and K before RoPE, neox RoPE; head size may differ
// from embedding / heads (attention.key_length).
#include "model/architecture.h"
#include "model/decoder_graph.h"

namespace minfer {
namespace {

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "qwen3"), {}};
    LayerConfig layer = uniform_layer_config(c.hp, RopeStyle::kNeox);
    layer.qk_norm = true;
    c.layers.assign(static_cast<std::size_t>(c.hp.n_layer), layer);
    return c;
}

}  // namespace

const Architecture& qwen3_architecture() {
    static const Architecture arch{"qwen3", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
