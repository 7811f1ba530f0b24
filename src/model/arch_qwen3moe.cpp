// Qwen3-MoE: qwen3's attention (per-head Q/K norms, neox RoPE, no biases) with a mixture of
// experts in every layer (expert_feed_forward_length wide, softmax router, top-k renormalised).
#include "model/architecture.h"
#include "model/decoder_graph.h"

namespace minfer {
namespace {

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "qwen3moe"), {}};
    if (c.hp.n_expert == 0) {
        throw FormatError(concat(meta.source(),
                                 ": metadata key 'qwen3moe.expert_count' is missing (a qwen3moe "
                                 "model has experts)"));
    }
    LayerConfig layer = uniform_layer_config(c.hp, RopeStyle::kNeox);
    layer.qk_norm = true;
    c.layers.assign(static_cast<std::size_t>(c.hp.n_layer), layer);
    return c;
}

}  // namespace

const Architecture& qwen3moe_architecture() {
    static const Architecture arch{"qwen3moe", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
