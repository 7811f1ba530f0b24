// Qwen2 / Qwen2.5: the llama block with biases on the Q, K and V projections and neox RoPE.
#include "model/architecture.h"
#include "model/decoder_graph.h"

namespace minfer {
namespace {

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "qwen2"), {}};
    LayerConfig layer = uniform_layer_config(c.hp, RopeStyle::kNeox);
    layer.qkv_bias = true;
    c.layers.assign(static_cast<std::size_t>(c.hp.n_layer), layer);
    return c;
}

}  // namespace

const Architecture& qwen2_architecture() {
    static const Architecture arch{"qwen2", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
