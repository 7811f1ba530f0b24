#pragma once
// The registry of model architectures (general.architecture). An architecture says which optional
// tensors its blocks have and how it rotates positions; the decoder graph builder reads these
// traits. Adding one: a file arch_NAME.cpp defining NAME_architecture() and a line in
// architecture.cpp's table.

#include <string>
#include <string_view>
#include <vector>

namespace minfer {

enum class RopeKind {
    Normal,  // rotates adjacent pairs (x[2i], x[2i+1]): llama
    Neox,    // rotates halves (x[i], x[i + n_rot/2]): qwen2, qwen3, gpt-neox
};

struct Architecture {
    std::string_view name;  // as in general.architecture and the hyperparameter key prefix
    RopeKind rope_kind = RopeKind::Normal;
    bool qkv_bias = false;  // blk.N.attn_{q,k,v}.bias present (qwen2)
    bool qk_norm = false;   // blk.N.attn_{q,k}_norm.weight: per-head RMSNorm before RoPE (qwen3)
};

// Throws UnsupportedError listing the supported architectures.
const Architecture& find_architecture(std::string_view name);
std::vector<std::string_view> supported_architectures();

// One per file arch_*.cpp.
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();

}  // namespace minfer
