#pragma once
// The key/value cache of one sequence, allocated once for the whole context: per layer, the K and
// V vectors of every position, in f16 (default), f32 or q8_0.
//
// Layouts (chosen for the attention kernels, kernels/attention.h):
//  - f16/f32, K: per layer and K/V head, tiles of kKeyTile positions stored dimension-major, so
//    that one vector load holds one dimension of 16 consecutive keys: element (pos, d) is at
//    k_tiles(layer, head)[(pos / 16 * head_dim_k + d) * 16 + pos % 16].
//  - f16/f32, V: per layer and K/V head, one row of head_dim_v values per position.
//  - q8_0: per layer, one row of q8_0 blocks holding every K/V head per position (K and V alike).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "model/hparams.h"

namespace minfer {

class KvCache {
  public:
    static constexpr int64_t kKeyTile = 16;

    // Throws UsageError for an unsupported type or a head size Q8_0 cannot hold (not a multiple of
    // 32).
    KvCache(const HParams& hp, int64_t n_ctx, GgmlType type);

    // The bytes a cache of n_ctx positions takes, computed without allocating (so that a context
    // too large for the machine is refused before anything is committed). Throws like the
    // constructor.
    static std::size_t bytes_for(const HParams& hp, int64_t n_ctx, GgmlType type);

    GgmlType type() const { return type_; }
    int64_t n_ctx() const { return n_ctx_; }
    std::size_t bytes() const { return storage_.size(); }

    // Writes position `pos` of `layer`: k = [n_head_kv][head_dim_k], v = [n_head_kv][head_dim_v].
    void store(int layer, int64_t pos, const float* k, const float* v);

    // f16/f32 caches.
    const std::byte* k_tiles(int layer, int64_t kv_head) const {
        return storage_.data() + layer_offset(layer) +
               static_cast<std::size_t>(kv_head) * k_head_bytes_;
    }
    const std::byte* v_rows(int layer, int64_t kv_head) const {
        return storage_.data() + layer_offset(layer) + k_layer_bytes_ +
               static_cast<std::size_t>(kv_head) * v_head_bytes_;
    }
    // q8_0 caches: every head of one position.
    const std::byte* k_row(int layer, int64_t pos) const {
        return storage_.data() + layer_offset(layer) + static_cast<std::size_t>(pos) * k_row_bytes_;
    }
    const std::byte* v_row(int layer, int64_t pos) const {
        return storage_.data() + layer_offset(layer) + k_layer_bytes_ +
               static_cast<std::size_t>(pos) * v_row_bytes_;
    }

  private:
    KvCache(const HParams& hp, int64_t n_ctx, GgmlType type, bool allocate);
    std::size_t layer_offset(int layer) const {
        return static_cast<std::size_t>(layer) * (k_layer_bytes_ + v_layer_bytes_);
    }

    GgmlType type_;
    int64_t n_ctx_;
    int64_t n_head_kv_, head_dim_k_, head_dim_v_;
    std::size_t k_row_bytes_ = 0, v_row_bytes_ = 0;    // q8_0: one position, every head
    std::size_t k_head_bytes_ = 0, v_head_bytes_ = 0;  // f16/f32: one head, every position
    std::size_t k_layer_bytes_ = 0, v_layer_bytes_ = 0;
    std::vector<std::byte> storage_;
};

// Parses "f16", "f32", "q8_0" (the --cache-type values); throws UsageError otherwise.
GgmlType parse_kv_cache_type(const std::string& name);

}  // namespace minfer
