#pragma once
// The shape of a paged KV cache: a pool of n_blocks blocks of block_size positions, and for each
// cache layer (one per attention layer) its K/V heads and head sizes. The model says the layers
// (Model::kv_cache_spec), the engine the number of blocks, the backend holds the memory.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"

namespace minfer {

// Positions per block: one K tile of the attention kernel (kernels/attention.h), and the
// granularity of prefix sharing.
inline constexpr int64_t kKvBlockSize = 16;

struct KvLayerShape {
    int64_t n_head_kv = 0;
    int64_t head_dim_k = 0;
    int64_t head_dim_v = 0;
};

struct KvCacheSpec {
    GgmlType type = GgmlType::F16;  // f16, f32 or q8_0
    int64_t block_size = kKvBlockSize;
    int64_t n_blocks = 0;
    std::vector<KvLayerShape> layers;

    int64_t n_slots() const { return n_blocks * block_size; }
    // Bytes of one block across every layer (K and V), in the layout backends use: f16/f32 hold
    // block_size x head size values per head for K and for V; q8_0 holds per position one row of
    // q8_0 blocks of all K heads and one of all V heads.
    std::size_t block_bytes() const;
    std::size_t bytes() const { return block_bytes() * static_cast<std::size_t>(n_blocks); }

    // Throws UsageError for a type other than f16/f32/q8_0, or a q8_0 cache over head sizes that
    // are not multiples of 32.
    void check() const;
};

// "f16" -> F16; throws UsageError listing f16, f32, q8_0.
GgmlType parse_kv_cache_type(const std::string& name);

}  // namespace minfer
