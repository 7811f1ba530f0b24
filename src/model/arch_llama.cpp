// Llama 1/2/3, TinyLlama, Mistral-style models and the llama2.c stories models: pre-norm decoder,
// RoPE on adjacent pairs, SwiGLU feed-forward, no biases. With expert_count it is Mixtral: every
// feed-forward is a mixture of experts (softmax router, top-k renormalised).
#include "model/architecture.h"
#include "model/decoder_graph.h"

namespace minfer {
namespace {

ModelConfig configure(const GgufMetadata& meta) {
    ModelConfig c{read_hparams(meta, "llama"), {}};
    c.layers.assign(static_cast<std::size_t>(c.hp.n_layer),
                    uniform_layer_config(c.hp, RopeStyle::kNormal));
    return c;
}

}  // namespace

const Architecture& llama_architecture() {
    static const Architecture arch{"llama", configure, bind_decoder};
    return arch;
}

}  // namespace minfer
