#include "model/kv_cache.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "kernels/activation_quant.h"
#include "kernels/vector_ops.h"

namespace minfer {

KvCache::KvCache(const HParams& hp, int64_t n_ctx, GgmlType type) : KvCache(hp, n_ctx, type, true) {}

KvCache::KvCache(const HParams& hp, int64_t n_ctx, GgmlType type, bool allocate)
    : type_(type),
      n_ctx_(n_ctx),
      n_head_kv_(hp.n_head_kv),
      head_dim_k_(hp.head_dim_k),
      head_dim_v_(hp.head_dim_v) {
    if (type != GgmlType::F16 && type != GgmlType::F32 && type != GgmlType::Q8_0) {
        throw UsageError(
            concat("KV cache type ", type_name(type), " is not supported (use f16, f32 or q8_0)"));
    }
    if (n_ctx < 1) throw UsageError(concat("context length must be at least 1, got ", n_ctx));
    if (type == GgmlType::Q8_0) {
        if (hp.head_dim_k % 32 != 0 || hp.head_dim_v % 32 != 0) {
            throw UsageError(concat(
                "a q8_0 KV cache needs head sizes that are multiples of 32; this model's are ",
                hp.head_dim_k, " and ", hp.head_dim_v, " (use f16)"));
        }
        k_row_bytes_ = row_size(type, hp.kv_width());
        v_row_bytes_ = row_size(type, hp.v_width());
        k_layer_bytes_ = static_cast<std::size_t>(n_ctx) * k_row_bytes_;
        v_layer_bytes_ = static_cast<std::size_t>(n_ctx) * v_row_bytes_;
    } else {
        const std::size_t element = type == GgmlType::F16 ? 2 : 4;
        const int64_t padded = (n_ctx + kKeyTile - 1) / kKeyTile * kKeyTile;
        k_head_bytes_ = static_cast<std::size_t>(padded * hp.head_dim_k) * element;
        v_head_bytes_ = static_cast<std::size_t>(n_ctx * hp.head_dim_v) * element;
        k_layer_bytes_ = static_cast<std::size_t>(hp.n_head_kv) * k_head_bytes_;
        v_layer_bytes_ = static_cast<std::size_t>(hp.n_head_kv) * v_head_bytes_;
    }
    if (allocate)
        storage_.resize((k_layer_bytes_ + v_layer_bytes_) * static_cast<std::size_t>(hp.n_layer));
}

std::size_t KvCache::bytes_for(const HParams& hp, int64_t n_ctx, GgmlType type) {
    const KvCache shape(hp, n_ctx, type, /*allocate=*/false);
    return (shape.k_layer_bytes_ + shape.v_layer_bytes_) * static_cast<std::size_t>(hp.n_layer);
}

void KvCache::store(int layer, int64_t pos, const float* k, const float* v) {
    std::byte* base = storage_.data() + layer_offset(layer);
    if (type_ == GgmlType::Q8_0) {
        quantize_activations_q8_0(
            k, reinterpret_cast<block_q8_0*>(base + static_cast<std::size_t>(pos) * k_row_bytes_),
            n_head_kv_ * head_dim_k_);
        quantize_activations_q8_0(
            v,
            reinterpret_cast<block_q8_0*>(base + k_layer_bytes_ +
                                          static_cast<std::size_t>(pos) * v_row_bytes_),
            n_head_kv_ * head_dim_v_);
        return;
    }
    const int64_t tile = pos / kKeyTile, lane = pos % kKeyTile;
    for (int64_t h = 0; h < n_head_kv_; ++h) {
        std::byte* k_head = base + static_cast<std::size_t>(h) * k_head_bytes_;
        std::byte* v_row = base + k_layer_bytes_ + static_cast<std::size_t>(h) * v_head_bytes_;
        const float* kh = k + h * head_dim_k_;
        const float* vh = v + h * head_dim_v_;
        if (type_ == GgmlType::F16) {
            auto* kt = reinterpret_cast<uint16_t*>(k_head) + tile * head_dim_k_ * kKeyTile + lane;
            for (int64_t d = 0; d < head_dim_k_; ++d) kt[d * kKeyTile] = f32_to_f16(kh[d]);
            convert_f32_to_f16(vh, reinterpret_cast<uint16_t*>(v_row) + pos * head_dim_v_,
                               head_dim_v_);
        } else {
            auto* kt = reinterpret_cast<float*>(k_head) + tile * head_dim_k_ * kKeyTile + lane;
            for (int64_t d = 0; d < head_dim_k_; ++d) kt[d * kKeyTile] = kh[d];
            std::memcpy(reinterpret_cast<float*>(v_row) + pos * head_dim_v_, vh,
                        static_cast<std::size_t>(head_dim_v_) * sizeof(float));
        }
    }
}

GgmlType parse_kv_cache_type(const std::string& name) {
    if (name == "f16") return GgmlType::F16;
    if (name == "f32") return GgmlType::F32;
    if (name == "q8_0") return GgmlType::Q8_0;
    throw UsageError(concat("unknown KV cache type '", name, "' (use f16, f32 or q8_0)"));
}

}  // namespace minfer
