// Llama 1/2/3, TinyLlama, Mistral-style models and the llama2.c stories models: pre-norm decoder,
// RoPE on adjacent pairs, SwiGLU feed-forward, no biases.
#include "model/architecture.h"

namespace minfer {

const Architecture& llama_architecture() {
    static const Architecture arch{.name = "llama", .rope_kind = RopeKind::Normal};
    return arch;
}

}  // namespace minfer
