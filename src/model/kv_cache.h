#pragma once
// The key/value cache of one sequence: per layer, K rows [n_ctx][kv_width] and V rows
// [n_ctx][v_width] in F16 (default), F32 or Q8_0. Allocated once, for the whole context.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "model/hparams.h"

namespace minfer {

class KvCache {
public:
    // Throws UsageError for an unsupported type or a head size Q8_0 cannot hold (not a multiple of 32).
    KvCache(const HParams& hp, int64_t n_ctx, GgmlType type);

    GgmlType type() const { return type_; }
    int64_t n_ctx() const { return n_ctx_; }
    std::size_t k_row_bytes() const { return k_row_bytes_; }
    std::size_t v_row_bytes() const { return v_row_bytes_; }
    std::size_t bytes() const { return storage_.size(); }

    std::byte* k_row(int layer, int64_t pos) { return storage_.data() + k_offset(layer, pos); }
    std::byte* v_row(int layer, int64_t pos) { return storage_.data() + v_offset(layer, pos); }
    const std::byte* k_row(int layer, int64_t pos) const { return storage_.data() + k_offset(layer, pos); }
    const std::byte* v_row(int layer, int64_t pos) const { return storage_.data() + v_offset(layer, pos); }

private:
    std::size_t k_offset(int layer, int64_t pos) const {
        return static_cast<std::size_t>(layer) * layer_bytes_ + static_cast<std::size_t>(pos) * k_row_bytes_;
    }
    std::size_t v_offset(int layer, int64_t pos) const {
        return static_cast<std::size_t>(layer) * layer_bytes_ + static_cast<std::size_t>(n_ctx_) * k_row_bytes_ +
               static_cast<std::size_t>(pos) * v_row_bytes_;
    }

    GgmlType type_;
    int64_t n_ctx_;
    std::size_t k_row_bytes_;
    std::size_t v_row_bytes_;
    std::size_t layer_bytes_;
    std::vector<std::byte> storage_;
};

// Parses "f16", "f32", "q8_0" (the --cache-type values); throws UsageError otherwise.
GgmlType parse_kv_cache_type(const std::string& name);

}  // namespace minfer
