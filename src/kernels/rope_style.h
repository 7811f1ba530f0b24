#pragma once
// Which pairs of a head's values RoPE rotates (shared by the kernels and the model's layer
// configurations).

#include <cstdint>

namespace minfer {

enum class RopeStyle : uint8_t {
    kNormal,  // rotates adjacent pairs (x[2i], x[2i+1]) (llama)
    kNeox,    // rotates (x[i], x[i + n_dims/2]) (qwen2, qwen3, gpt-neox)
};

}  // namespace minfer
