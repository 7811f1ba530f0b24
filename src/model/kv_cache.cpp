#include "model/kv_cache.h"

#include "core/error.h"

namespace minfer {

KvCache::KvCache(const HParams& hp, int64_t n_ctx, GgmlType type) : type_(type), n_ctx_(n_ctx) {
    if (type != GgmlType::F16 && type != GgmlType::F32 && type != GgmlType::Q8_0) {
        throw UsageError(concat("KV cache type ", type_name(type), " is not supported (use f16, f32 or q8_0)"));
    }
    if (n_ctx < 1) throw UsageError(concat("context length must be at least 1, got ", n_ctx));
    if (type == GgmlType::Q8_0 && (hp.head_dim_k % 32 != 0 || hp.head_dim_v % 32 != 0)) {
        throw UsageError(concat("a q8_0 KV cache needs head sizes that are multiples of 32; this model's are ",
                                hp.head_dim_k, " and ", hp.head_dim_v, " (use f16)"));
    }
    k_row_bytes_ = row_size(type, hp.kv_width());
    v_row_bytes_ = row_size(type, hp.v_width());
    layer_bytes_ = static_cast<std::size_t>(n_ctx) * (k_row_bytes_ + v_row_bytes_);
    storage_.resize(layer_bytes_ * static_cast<std::size_t>(hp.n_layer));
}

GgmlType parse_kv_cache_type(const std::string& name) {
    if (name == "f16") return GgmlType::F16;
    if (name == "f32") return GgmlType::F32;
    if (name == "q8_0") return GgmlType::Q8_0;
    throw UsageError(concat("unknown KV cache type '", name, "' (use f16, f32 or q8_0)"));
}

}  // namespace minfer
