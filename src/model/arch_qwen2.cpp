// Qwen2 / Qwen2.5: the llama block with biases on the Q, K and V projections and neox RoPE.
#include "model/architecture.h"

namespace minfer {

const Architecture& qwen2_architecture() {
    static const Architecture arch{.name = "qwen2", .rope_kind = RopeKind::Neox, .qkv_bias = true};
    return arch;
}

}  // namespace minfer
