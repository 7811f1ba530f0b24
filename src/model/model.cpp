#include "model/model.h"

#include <algorithm>

#include "core/error.h"

namespace minfer {

std::shared_ptr<const Model> Model::load(const std::filesystem::path& path) {
    return std::make_shared<const Model>(PrivateKey{}, GgufFile::open(path));
}

Model::Model(PrivateKey, GgufFile file) : file_(std::move(file)) {
    if (file_.tensors().empty()) {
        throw FormatError(concat(file_.path().string(),
                                 ": has no tensors (a vocabulary-only file has no model to run)"));
    }
    const auto arch_name = metadata().get_string_optional("general.architecture");
    if (!arch_name) {
        throw FormatError(
            concat(file_.path().string(), ": metadata key 'general.architecture' is missing"));
    }
    arch_ = &find_architecture(*arch_name);
    config_ = arch_->configure(metadata());
    const TensorInfo* embd = file_.find_tensor("token_embd.weight");
    if (embd == nullptr) {
        throw FormatError(concat(file_.path().string(), ": tensor 'token_embd.weight' is missing"));
    }
    config_.hp.n_vocab = embd->ne[1];
    WeightBinder binder(file_);
    graph_ = arch_->bind(binder, config_);
    bytes_per_token_ = binder.bytes_per_token();
}

KvCacheSpec Model::kv_cache_spec(GgmlType type, int64_t n_blocks) const {
    KvCacheSpec spec;
    spec.type = type;
    spec.n_blocks = n_blocks;
    for (const LayerConfig& l : config_.layers)
        spec.layers.push_back(KvLayerShape{l.n_head_kv, l.head_dim_k, l.head_dim_v});
    spec.check();
    return spec;
}

int64_t Model::kv_window() const {
    int64_t window = 0;
    for (const LayerConfig& l : config_.layers) {
        if (l.attn_window == 0) return 0;
        window = std::max(window, l.attn_window);
    }
    return window;
}

uint64_t Model::n_params() const {
    uint64_t n = 0;
    for (const TensorInfo* t : file_.tensors()) n += static_cast<uint64_t>(t->n_elements());
    return n;
}

uint64_t Model::weight_bytes() const {
    uint64_t n = 0;
    for (const TensorInfo* t : file_.tensors()) n += t->n_bytes;
    return n;
}

}  // namespace minfer
