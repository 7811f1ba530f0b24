#include "model/model.h"

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
    hparams_ = read_hparams(metadata(), *arch_);
    weights_ = bind_weights(file_, *arch_, hparams_);
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

uint64_t Model::bytes_per_token() const {
    const auto bytes = [](const Weight& w) -> uint64_t { return w ? w.info->n_bytes : 0; };
    uint64_t n = bytes(weights_.output) + bytes(weights_.output_norm) +
                 weights_.token_embd.info->n_bytes / static_cast<uint64_t>(hparams_.n_vocab);
    for (const LayerWeights& l : weights_.layers) {
        for (const Weight* w :
             {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm,
              &l.ffn_norm, &l.ffn_gate, &l.ffn_up, &l.ffn_down}) {
            n += bytes(*w);
        }
    }
    return n;
}

}  // namespace minfer
