// Qwen3: no biases, a per-head RMSNorm on Q and K before RoPE, neox RoPE; head size may differ
// from embedding / heads (attention.key_length).
#include "model/architecture.h"

namespace minfer {

const Architecture& qwen3_architecture() {
    static const Architecture arch{.name = "qwen3", .rope_kind = RopeKind::Neox, .qk_norm = true};
    return arch;
}

}  // namespace minfer
