#pragma once
// The paged KV cache of the CPU backend: every block of every cache layer, laid out for the
// attention kernel (kernels/attention.h). Memory is reserved at once and committed by the OS as
// blocks are first written, so a large pool costs only what is used.
//
// Layout, per cache layer, then per block (block_size = 16 positions = one K tile):
//  - f16/f32: per K/V head, the K tile [head_dim_k][16] (dimension-major: element (lane, d) at
//    [d * 16 + lane]) followed by the V rows [16][head_dim_v].
//  - q8_0: 16 rows of q8_0 blocks holding every K head of one position, then 16 such rows for V.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/kv_spec.h"

namespace minfer {

class CpuKvPool {
  public:
    // Throws like KvCacheSpec::check.
    explicit CpuKvPool(const KvCacheSpec& spec);

    const KvCacheSpec& spec() const { return spec_; }
    std::size_t bytes() const { return bytes_; }
    bool f16() const { return spec_.type == GgmlType::F16; }

    // Writes `slot` (block * 16 + position in block) of `layer`: k = [n_head_kv][head_dim_k],
    // v = [n_head_kv][head_dim_v].
    void store(int layer, int64_t slot, const float* k, const float* v);
    // Copies positions 0 .. n_positions-1 of block `from` to block `to`, in every layer.
    void copy_block(int32_t from, int32_t to, int64_t n_positions);

    // f16/f32 caches.
    const std::byte* k_tile(int layer, int32_t block, int64_t kv_head) const {
        return head_base(layer, block, kv_head);
    }
    const std::byte* v_tile(int layer, int32_t block, int64_t kv_head) const {
        return head_base(layer, block, kv_head) + layers_[static_cast<std::size_t>(layer)].k_tile_bytes;
    }
    // q8_0 caches: every head of the position at `slot`.
    const std::byte* k_row(int layer, int64_t slot) const;
    const std::byte* v_row(int layer, int64_t slot) const;

  private:
    struct Layer {
        std::size_t offset;       // of block 0
        std::size_t block_bytes;  // one block of this layer
        std::size_t k_tile_bytes, head_bytes;  // f16/f32
        std::size_t k_row_bytes, v_row_bytes;  // q8_0
        KvLayerShape shape;
    };
    std::byte* block_base(int layer, int32_t block) const {
        const Layer& l = layers_[static_cast<std::size_t>(layer)];
        return storage_.get() + l.offset + static_cast<std::size_t>(block) * l.block_bytes;
    }
    std::byte* head_base(int layer, int32_t block, int64_t kv_head) const {
        return block_base(layer, block) +
               static_cast<std::size_t>(kv_head) * layers_[static_cast<std::size_t>(layer)].head_bytes;
    }

    KvCacheSpec spec_;
    std::vector<Layer> layers_;
    std::size_t bytes_ = 0;
    std::unique_ptr<std::byte[]> storage_;
};

}  // namespace minfer
