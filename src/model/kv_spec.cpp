#include "model/kv_spec.h"

#include "core/error.h"

namespace minfer {

std::size_t KvCacheSpec::block_bytes() const {
    std::size_t bytes = 0;
    for (const KvLayerShape& l : layers) {
        if (type == GgmlType::Q8_0) {
            bytes += row_size(type, l.n_head_kv * l.head_dim_k) + row_size(type, l.n_head_kv * l.head_dim_v);
        } else {
            const std::size_t element = type == GgmlType::F16 ? 2 : 4;
            bytes += static_cast<std::size_t>(l.n_head_kv * (l.head_dim_k + l.head_dim_v)) * element;
        }
    }
    return bytes * static_cast<std::size_t>(block_size);
}

void KvCacheSpec::check() const {
    if (type != GgmlType::F16 && type != GgmlType::F32 && type != GgmlType::Q8_0) {
        throw UsageError(
            concat("KV cache type ", type_name(type), " is not supported (use f16, f32 or q8_0)"));
    }
    if (block_size != kKvBlockSize) throw UsageError(concat("KV block size must be ", kKvBlockSize));
    if (type != GgmlType::Q8_0) return;
    for (const KvLayerShape& l : layers) {
        if (l.head_dim_k % 32 != 0 || l.head_dim_v % 32 != 0) {
            throw UsageError(concat(
                "a q8_0 KV cache needs head sizes that are multiples of 32; this model's are ",
                l.head_dim_k, " and ", l.head_dim_v, " (use f16)"));
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
