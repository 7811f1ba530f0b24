#include "backend/cpu/kv_pool.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "kernels/activation_quant.h"
#include "kernels/attention.h"
#include "kernels/vector_ops.h"

namespace minfer {
namespace {

constexpr int64_t kMaxConvertedK = 256;  // values of a K head converted at once (on the stack)

}  // namespace

CpuKvPool::CpuKvPool(const KvCacheSpec& spec) : spec_(spec) {
    spec_.check();
    static_assert(kKvBlockSize == kAttentionKeyTile, "a cache block is one attention key tile");
    const auto positions = static_cast<std::size_t>(spec_.block_size);
    for (const KvLayerShape& s : spec_.layers) {
        Layer l{};
        l.shape = s;
        l.offset = bytes_;
        if (spec_.type == GgmlType::Q8_0) {
            l.k_row_bytes = row_size(spec_.type, s.n_head_kv * s.head_dim_k);
            l.v_row_bytes = row_size(spec_.type, s.n_head_kv * s.head_dim_v);
            l.block_bytes = positions * (l.k_row_bytes + l.v_row_bytes);
        } else {
            const std::size_t element = spec_.type == GgmlType::F16 ? 2 : 4;
            l.k_tile_bytes = positions * static_cast<std::size_t>(s.head_dim_k) * element;
            l.v_tile_bytes = positions * static_cast<std::size_t>(s.head_dim_v) * element;
            l.block_bytes =
                static_cast<std::size_t>(s.n_head_kv) * (l.k_tile_bytes + l.v_tile_bytes);
            l.v_offset = l.offset + static_cast<std::size_t>(s.n_head_kv) * l.k_tile_bytes *
                                        static_cast<std::size_t>(spec_.n_blocks);
        }
        bytes_ += l.block_bytes * static_cast<std::size_t>(spec_.n_blocks);
        layers_.push_back(l);
    }
    // Not value-initialized: pages are committed when first written, not here. Attention reads
    // only positions that were stored (lanes beyond them in a tile are computed and discarded).
    // In huge pages where the kernel gives them: a long context's tiles are read from all over
    // the pool, and with 4 KiB pages every 2 KiB tile cost a TLB miss.
    storage_ = std::make_unique<HugePageMemory>(std::max<std::size_t>(bytes_, 1));
}

const std::byte* CpuKvPool::k_row(int layer, int64_t slot) const {
    const Layer& l = layers_[static_cast<std::size_t>(layer)];
    return block_base(layer, static_cast<int32_t>(slot / spec_.block_size)) +
           static_cast<std::size_t>(slot % spec_.block_size) * l.k_row_bytes;
}

const std::byte* CpuKvPool::v_row(int layer, int64_t slot) const {
    const Layer& l = layers_[static_cast<std::size_t>(layer)];
    return block_base(layer, static_cast<int32_t>(slot / spec_.block_size)) +
           static_cast<std::size_t>(spec_.block_size) * l.k_row_bytes +
           static_cast<std::size_t>(slot % spec_.block_size) * l.v_row_bytes;
}

void CpuKvPool::store(int layer, int64_t slot, const float* k, const float* v) {
    const Layer& l = layers_[static_cast<std::size_t>(layer)];
    const KvLayerShape& s = l.shape;
    if (spec_.type == GgmlType::Q8_0) {
        quantize_activations_q8_0(
            k, reinterpret_cast<block_q8_0*>(const_cast<std::byte*>(k_row(layer, slot))),
            s.n_head_kv * s.head_dim_k);
        quantize_activations_q8_0(
            v, reinterpret_cast<block_q8_0*>(const_cast<std::byte*>(v_row(layer, slot))),
            s.n_head_kv * s.head_dim_v);
        return;
    }
    const auto block = static_cast<int32_t>(slot / spec_.block_size);
    const int64_t lane = slot % spec_.block_size;
    for (int64_t h = 0; h < s.n_head_kv; ++h) {
        std::byte* head = k_tile(layer, block, h);
        std::byte* values = v_tile(layer, block, h);
        const float* kh = k + h * s.head_dim_k;
        const float* vh = v + h * s.head_dim_v;
        if (spec_.type == GgmlType::F16) {
            // The K tile is [head_dim][block_size]: this position's values go one per row. They
            // are converted together first (vector f16 conversion) and then scattered.
            uint16_t converted[kMaxConvertedK];
            auto* kt = reinterpret_cast<uint16_t*>(head) + lane;
            for (int64_t d0 = 0; d0 < s.head_dim_k; d0 += kMaxConvertedK) {
                const int64_t n = std::min<int64_t>(kMaxConvertedK, s.head_dim_k - d0);
                convert_f32_to_f16(kh + d0, converted, n);
                for (int64_t d = 0; d < n; ++d) kt[(d0 + d) * spec_.block_size] = converted[d];
            }
            convert_f32_to_f16(vh, reinterpret_cast<uint16_t*>(values) + lane * s.head_dim_v,
                               s.head_dim_v);
        } else {
            auto* kt = reinterpret_cast<float*>(head) + lane;
            for (int64_t d = 0; d < s.head_dim_k; ++d) kt[d * spec_.block_size] = kh[d];
            std::memcpy(reinterpret_cast<float*>(values) + lane * s.head_dim_v, vh,
                        static_cast<std::size_t>(s.head_dim_v) * sizeof(float));
        }
    }
}

void CpuKvPool::copy_block(int32_t from, int32_t to, int64_t n_positions) {
    // Whole blocks: the positions beyond n_positions are overwritten before they are read.
    (void)n_positions;
    for (std::size_t layer = 0; layer < layers_.size(); ++layer) {
        const int il = static_cast<int>(layer);
        const Layer& l = layers_[layer];
        if (spec_.type == GgmlType::Q8_0) {
            std::memcpy(block_base(il, to), block_base(il, from), l.block_bytes);
            continue;
        }
        for (int64_t h = 0; h < l.shape.n_head_kv; ++h) {
            std::memcpy(k_tile(il, to, h), k_tile(il, from, h), l.k_tile_bytes);
            std::memcpy(v_tile(il, to, h), v_tile(il, from, h), l.v_tile_bytes);
        }
    }
}

}  // namespace minfer
