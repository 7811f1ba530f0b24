#pragma once
// The paged KV cache of the CPU backend: every block of every cache layer, laid out for the
// attention kernel (kernels/attention.h). Memory is reserved at once and committed by the OS as
// blocks are first written, so a large pool costs only what is used.
//
// Layout, per cache layer:
//  - f16/f32: per K/V head, the K tiles of every block, then per head the V tiles of every block:
//    a K tile is [head_dim_k][16] (dimension-major: element (lane, d) at [d * 16 + lane]), a V
//    tile the rows [16][head_dim_v]. A thread attends one head over a sequence's blocks, which are
//    mostly consecutive: its keys, then its values, are each one run through memory that the
//    hardware prefetchers follow (with every head's K and V of a block side by side, a thread read
//    2 KiB of every 8 and the prefetchers lost the stream at each tile).
//  - q8_0: per block, 16 rows of q8_0 blocks holding every K head of one position, then 16 such
//    rows for V.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/huge_page_memory.h"
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
    std::byte* k_tile(int layer, int32_t block, int64_t kv_head) const {
        const Layer& l = layers_[static_cast<std::size_t>(layer)];
        return storage_->data() + l.offset +
               (static_cast<std::size_t>(kv_head) * n_blocks() + static_cast<std::size_t>(block)) *
                   l.k_tile_bytes;
    }
    std::byte* v_tile(int layer, int32_t block, int64_t kv_head) const {
        const Layer& l = layers_[static_cast<std::size_t>(layer)];
        return storage_->data() + l.v_offset +
               (static_cast<std::size_t>(kv_head) * n_blocks() + static_cast<std::size_t>(block)) *
                   l.v_tile_bytes;
    }
    // q8_0 caches: every head of the position at `slot`.
    const std::byte* k_row(int layer, int64_t slot) const;
    const std::byte* v_row(int layer, int64_t slot) const;

  private:
    struct Layer {
        std::size_t offset;                      // the layer's first byte (f16/f32: its K tiles)
        std::size_t v_offset;                    // f16/f32: its V tiles
        std::size_t block_bytes;                 // one block of this layer, every head
        std::size_t k_tile_bytes, v_tile_bytes;  // f16/f32
        std::size_t k_row_bytes, v_row_bytes;    // q8_0
        KvLayerShape shape;
    };
    std::size_t n_blocks() const { return static_cast<std::size_t>(spec_.n_blocks); }
    // q8_0: a block's rows.
    std::byte* block_base(int layer, int32_t block) const {
        const Layer& l = layers_[static_cast<std::size_t>(layer)];
        return storage_->data() + l.offset + static_cast<std::size_t>(block) * l.block_bytes;
    }

    KvCacheSpec spec_;
    std::vector<Layer> layers_;
    std::size_t bytes_ = 0;
    std::unique_ptr<HugePageMemory> storage_;
};

}  // namespace minfer
