#include "model/weights.h"

#include "core/error.h"
#include "quant/supported_types.h"

namespace minfer {
namespace {

class Binder {
  public:
    explicit Binder(const GgufFile& file) : file_(file) {}

    // A matrix [n_cols -> n_rows] of any supported type.
    Weight matrix(const std::string& name, int64_t n_cols, int64_t n_rows,
                  bool required = true) const {
        const TensorInfo* t = file_.find_tensor(name);
        if (t == nullptr) return absent(name, required, concat("[", n_cols, ", ", n_rows, "]"));
        if (t->n_dims != 2 || t->ne[0] != n_cols || t->ne[1] != n_rows) {
            throw FormatError(concat(file_.path().string(), ": tensor '", name, "' has shape ",
                                     t->shape_string(), ", expected [", n_cols, ", ", n_rows, "]"));
        }
        require_supported_weight_type(*t);
        return Weight{t};
    }

    // A vector [n] of f32 (norm weights, biases).
    Weight vector(const std::string& name, int64_t n, bool required = true) const {
        const TensorInfo* t = file_.find_tensor(name);
        if (t == nullptr) return absent(name, required, concat("[", n, "]"));
        if (t->n_elements() != n || t->ne[0] != n) {
            throw FormatError(concat(file_.path().string(), ": tensor '", name, "' has shape ",
                                     t->shape_string(), ", expected [", n, "]"));
        }
        if (t->type != GgmlType::F32) {
            throw UnsupportedError(concat(file_.path().string(), ": tensor '", name, "' has type ",
                                          type_name(t->type),
                                          "; minfer expects f32 for norms and biases"));
        }
        return Weight{t};
    }

  private:
    Weight absent(const std::string& name, bool required, const std::string& shape) const {
        if (required) {
            throw FormatError(concat(file_.path().string(), ": tensor '", name,
                                     "' is missing (expected shape ", shape, ")"));
        }
        return Weight{};
    }

    const GgufFile& file_;
};

}  // namespace

ModelWeights bind_weights(const GgufFile& file, const Architecture& arch, HParams& hp) {
    const Binder bind(file);
    ModelWeights w;

    const TensorInfo* embd = file.find_tensor("token_embd.weight");
    if (embd == nullptr) {
        throw FormatError(concat(file.path().string(), ": tensor 'token_embd.weight' is missing"));
    }
    hp.n_vocab = embd->ne[1];
    w.token_embd = bind.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);
    w.output_norm = bind.vector("output_norm.weight", hp.n_embd);
    w.output = bind.matrix("output.weight", hp.n_embd, hp.n_vocab, /*required=*/false);
    if (!w.output) {
        w.output = w.token_embd;
        w.tied_output = true;
    }
    w.rope_freqs = bind.vector("rope_freqs.weight", hp.n_rot / 2, /*required=*/false);

    w.layers.resize(static_cast<std::size_t>(hp.n_layer));
    for (int64_t i = 0; i < hp.n_layer; ++i) {
        auto& l = w.layers[static_cast<std::size_t>(i)];
        const auto name = [i](const char* suffix) { return concat("blk.", i, ".", suffix); };
        l.attn_norm = bind.vector(name("attn_norm.weight"), hp.n_embd);
        l.wq = bind.matrix(name("attn_q.weight"), hp.n_embd, hp.q_width());
        l.wk = bind.matrix(name("attn_k.weight"), hp.n_embd, hp.kv_width());
        l.wv = bind.matrix(name("attn_v.weight"), hp.n_embd, hp.v_width());
        l.wo = bind.matrix(name("attn_output.weight"), hp.attn_out_width(), hp.n_embd);
        if (arch.qkv_bias) {
            l.bq = bind.vector(name("attn_q.bias"), hp.q_width());
            l.bk = bind.vector(name("attn_k.bias"), hp.kv_width());
            l.bv = bind.vector(name("attn_v.bias"), hp.v_width());
        }
        if (arch.qk_norm) {
            l.q_norm = bind.vector(name("attn_q_norm.weight"), hp.head_dim_k);
            l.k_norm = bind.vector(name("attn_k_norm.weight"), hp.head_dim_k);
        }
        l.ffn_norm = bind.vector(name("ffn_norm.weight"), hp.n_embd);
        l.ffn_gate = bind.matrix(name("ffn_gate.weight"), hp.n_embd, hp.n_ff);
        l.ffn_up = bind.matrix(name("ffn_up.weight"), hp.n_embd, hp.n_ff);
        l.ffn_down = bind.matrix(name("ffn_down.weight"), hp.n_ff, hp.n_embd);
    }
    return w;
}

}  // namespace minfer
