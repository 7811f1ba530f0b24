#include "model/decoder_graph.h"

#include <cmath>
#include <map>
#include <string>
#include <tuple>

namespace minfer {
namespace {

struct LayerWeights {
    Weight attn_norm;           // [n_embd] f32
    Weight wq, wk, wv, wo;      // [n_embd -> q_width], [-> kv_width], [-> v_width],
                                // [attn_out_width -> n_embd]; slices of attn_qkv if fused
    Weight bq, bk, bv;          // biases [q_width], [kv_width], [v_width] (qkv_bias)
    Weight q_norm, k_norm;      // per-head norms [head_dim_k] (qk_norm)
    Weight attn_post_norm;      // [n_embd] (NormPlacement::kPreAndPost)
    Weight ffn_norm;            // [n_embd]
    Weight ffn_gate, ffn_up;    // [n_embd -> n_ff]; slices of ffn_up if fused
    Weight ffn_down;            // [n_ff -> n_embd]
    Weight ffn_post_norm;       // [n_embd] (NormPlacement::kPreAndPost)
    Weight router;              // [n_embd -> n_expert] (experts)
    Weight gate_exps, up_exps;  // [n_embd, n_ff, n_expert] (experts)
    Weight down_exps;           // [n_ff, n_embd, n_expert] (experts)
};

LayerWeights bind_layer(WeightBinder& bind, const HParams& hp, const LayerConfig& c,
                        std::size_t i) {
    LayerWeights l;
    const auto name = [i](const char* suffix) { return concat("blk.", i, ".", suffix); };
    l.attn_norm = bind.vector(name("attn_norm.weight"), hp.n_embd);
    if (c.qkv_layout == QkvLayout::kFused) {
        const Weight qkv = bind.matrix(name("attn_qkv.weight"), hp.n_embd,
                                       c.q_width() + c.kv_width() + c.v_width());
        l.wq = qkv.rows(0, c.q_width());
        l.wk = qkv.rows(c.q_width(), c.kv_width());
        l.wv = qkv.rows(c.q_width() + c.kv_width(), c.v_width());
    } else {
        l.wq = bind.matrix(name("attn_q.weight"), hp.n_embd, c.q_width());
        l.wk = bind.matrix(name("attn_k.weight"), hp.n_embd, c.kv_width());
        l.wv = bind.matrix(name("attn_v.weight"), hp.n_embd, c.v_width());
    }
    l.wo = bind.matrix(name("attn_output.weight"), c.attn_out_width(), hp.n_embd);
    if (c.qkv_bias) {
        l.bq = bind.vector(name("attn_q.bias"), c.q_width());
        l.bk = bind.vector(name("attn_k.bias"), c.kv_width());
        l.bv = bind.vector(name("attn_v.bias"), c.v_width());
    }
    if (c.qk_norm) {
        l.q_norm = bind.vector(name("attn_q_norm.weight"), c.head_dim_k);
        l.k_norm = bind.vector(name("attn_k_norm.weight"), c.head_dim_k);
    }
    l.ffn_norm = bind.vector(name("ffn_norm.weight"), hp.n_embd);
    if (c.norms == NormPlacement::kPreAndPost) {
        l.attn_post_norm = bind.vector(name("post_attention_norm.weight"), hp.n_embd);
        l.ffn_post_norm = bind.vector(name("post_ffw_norm.weight"), hp.n_embd);
    }
    if (c.n_expert > 0) {
        l.router = bind.matrix(name("ffn_gate_inp.weight"), hp.n_embd, c.n_expert);
        l.gate_exps = bind.experts(name("ffn_gate_exps.weight"), hp.n_embd, c.n_ff, c.n_expert,
                                   c.n_expert_used);
        l.up_exps = bind.experts(name("ffn_up_exps.weight"), hp.n_embd, c.n_ff, c.n_expert,
                                 c.n_expert_used);
        l.down_exps = bind.experts(name("ffn_down_exps.weight"), c.n_ff, hp.n_embd, c.n_expert,
                                   c.n_expert_used);
    } else if (c.gate_up_layout == GateUpLayout::kFused) {
        const Weight gate_up = bind.matrix(name("ffn_up.weight"), hp.n_embd, 2 * c.n_ff);
        l.ffn_gate = gate_up.rows(0, c.n_ff);
        l.ffn_up = gate_up.rows(c.n_ff, c.n_ff);
        l.ffn_down = bind.matrix(name("ffn_down.weight"), c.n_ff, hp.n_embd);
    } else {
        l.ffn_gate = bind.matrix(name("ffn_gate.weight"), hp.n_embd, c.n_ff);
        l.ffn_up = bind.matrix(name("ffn_up.weight"), hp.n_embd, c.n_ff);
        l.ffn_down = bind.matrix(name("ffn_down.weight"), c.n_ff, hp.n_embd);
    }
    return l;
}

class DecoderGraph final : public ModelGraph {
  public:
    DecoderGraph(WeightBinder& bind, const ModelConfig& config) : config_(config) {
        const HParams& hp = config.hp;
        token_embd_ = bind.embeddings("token_embd.weight", hp.n_embd, hp.n_vocab);
        output_norm_ = bind.vector("output_norm.weight", hp.n_embd);
        output_ = bind.matrix("output.weight", hp.n_embd, hp.n_vocab, /*required=*/false);
        if (!output_) output_ = bind.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);  // tied
        // RoPE frequency factors: Llama 3.1's rope_freqs, or LongRoPE's pair (phi3), of which
        // record() picks one by the context.
        rope_freqs_ = bind.vector("rope_freqs.weight", hp.n_rot / 2, /*required=*/false);
        rope_long_ = bind.vector("rope_factors_long.weight", hp.n_rot / 2, /*required=*/false);
        rope_short_ =
            bind.vector("rope_factors_short.weight", hp.n_rot / 2, static_cast<bool>(rope_long_));
        layers_.reserve(config.layers.size());
        for (std::size_t i = 0; i < config.layers.size(); ++i)
            layers_.push_back(bind_layer(bind, hp, config.layers[i], i));
    }

    Graph record(BatchInputs in, int64_t kv_block_size, int64_t n_ctx) const override {
        Graph g;
        g.in = std::move(in);
        g.kv_block_size = kv_block_size;
        Recorder r(*this, g, n_ctx);
        r.record();
        return g;
    }

  private:
    // Records one graph: buffers of the whole batch, the ops of every layer.
    class Recorder {
      public:
        Recorder(const DecoderGraph& m, Graph& g, int64_t n_ctx)
            : m_(m), hp_(m.config_.hp), g_(g), b_(g), n_(g.in.n_tokens()) {
            // llama.cpp's choice: the long factors once a sequence may outgrow the original
            // context.
            if (m.rope_freqs_) {
                rope_factors_ = &m.rope_freqs_;
            } else if (m.rope_long_) {
                rope_factors_ = n_ctx > hp_.n_ctx_orig ? &m.rope_long_ : &m.rope_short_;
            }
        }

        void record() {
            residual_ = b_.buffer("residual", n_, hp_.n_embd);
            normed_ = b_.buffer("normed", n_, hp_.n_embd);
            projected_ = b_.buffer("projected", n_, hp_.n_embd);
            b_.op(OpType::GetRows, "token_embd", -1, residual_, n_, hp_.n_embd).weight =
                &m_.token_embd_;
            if (m_.config_.embedding_scale > 0.0f)
                scale("embd_scale", -1, residual_, hp_.n_embd, m_.config_.embedding_scale);
            for (std::size_t i = 0; i < m_.layers_.size(); ++i) {
                layer_ = static_cast<int>(i);
                attention_block(m_.config_.layers[i], m_.layers_[i]);
                if (m_.config_.layers[i].n_expert > 0) {
                    moe_block(m_.config_.layers[i], m_.layers_[i]);
                } else {
                    ffn_block(m_.config_.layers[i], m_.layers_[i]);
                }
            }
            layer_ = -1;
            output();
        }

      private:
        // A buffer [n][width] shared by every layer that needs one of this name and width.
        BufferId rows_of(const char* name, int64_t width, DType type = DType::kF32) {
            auto [it, added] = by_width_.try_emplace({name, width}, kNoBuffer);
            if (added) it->second = b_.buffer(name, n_, width, type);
            return it->second;
        }
        void matmul(const char* label, BufferId dst, BufferId src, const Weight& w, int64_t width) {
            Op& o = b_.op(OpType::MatMul, label, layer_, dst, n_, width);
            o.src0 = src;
            o.weight = &w;
        }
        void norm(const char* label, BufferId dst, BufferId src, const Weight& w) {
            Op& o = b_.op(OpType::RmsNorm, label, layer_, dst, n_, hp_.n_embd);
            o.src0 = src;
            o.weight = &w;
            o.eps = hp_.rms_eps;
        }
        void scale(const char* label, int layer, BufferId dst, int64_t width, float factor) {
            b_.op(OpType::Scale, label, layer, dst, n_, width).factor = factor;
        }
        void add_residual(const char* label) {
            b_.op(OpType::Add, label, layer_, residual_, n_, hp_.n_embd).src0 = projected_;
        }

        void attention_block(const LayerConfig& c, const LayerWeights& l) {
            const BufferId q = rows_of("q", c.q_width()), k = rows_of("k", c.kv_width()),
                           v = rows_of("v", c.v_width()),
                           attn_out = rows_of("attn_out", c.attn_out_width());
            const AttentionParams attn{c.n_head,
                                       c.n_head_kv,
                                       c.head_dim_k,
                                       c.head_dim_v,
                                       c.attn_scaling == AttnScaling::kQuery ? 1.0f : c.attn_scale,
                                       c.attn_softcap,
                                       c.attn_window};
            norm("attn_norm", normed_, residual_, l.attn_norm);
            matmul("attn_q", q, normed_, l.wq, c.q_width());
            matmul("attn_k", k, normed_, l.wk, c.kv_width());
            matmul("attn_v", v, normed_, l.wv, c.v_width());
            if (c.qkv_bias) {
                b_.op(OpType::AddBias, "attn_q.bias", layer_, q, n_, c.q_width()).weight = &l.bq;
                b_.op(OpType::AddBias, "attn_k.bias", layer_, k, n_, c.kv_width()).weight = &l.bk;
                b_.op(OpType::AddBias, "attn_v.bias", layer_, v, n_, c.v_width()).weight = &l.bv;
            }
            if (c.qk_norm) {
                for (auto [label, dst, width, w] :
                     {std::tuple{"attn_q_norm", q, c.q_width(), &l.q_norm},
                      std::tuple{"attn_k_norm", k, c.kv_width(), &l.k_norm}}) {
                    Op& o = b_.op(OpType::HeadRmsNorm, label, layer_, dst, n_, width);
                    o.weight = w;
                    o.head_dim = c.head_dim_k;
                    o.eps = hp_.rms_eps;
                }
            }
            for (auto [label, dst, width] :
                 {std::tuple{"rope_q", q, c.q_width()}, std::tuple{"rope_k", k, c.kv_width()}}) {
                Op& o = b_.op(OpType::Rope, label, layer_, dst, n_, width);
                o.weight = rope_factors_;
                o.head_dim = c.head_dim_k;
                o.rope = c.rope;
            }
            if (c.attn_scaling == AttnScaling::kQuery)
                scale("attn_q_scale", layer_, q, c.q_width(), c.attn_scale);
            Op& store = b_.op(OpType::StoreKv, "kv_store", layer_, kNoBuffer, n_, c.kv_width());
            store.src0 = k;
            store.src1 = v;
            store.attn = attn;
            store.kv_layer = layer_;
            Op& attention =
                b_.op(OpType::Attention, "attention", layer_, attn_out, n_, c.attn_out_width());
            attention.src0 = q;
            attention.attn = attn;
            attention.kv_layer = layer_;
            matmul("attn_output", projected_, attn_out, l.wo, hp_.n_embd);
            if (c.norms == NormPlacement::kPreAndPost)
                norm("attn_post_norm", projected_, projected_, l.attn_post_norm);
            add_residual("attn_residual");
        }

        // Dense feed-forward: act(gate) * up, down.
        void ffn_block(const LayerConfig& c, const LayerWeights& l) {
            const BufferId gate = rows_of("ffn_gate", c.n_ff), up = rows_of("ffn_up", c.n_ff);
            norm("ffn_norm", normed_, residual_, l.ffn_norm);
            matmul("ffn_gate", gate, normed_, l.ffn_gate, c.n_ff);
            matmul("ffn_up", up, normed_, l.ffn_up, c.n_ff);
            const bool gelu = c.ffn_act == FfnActivation::kGeluTanh;
            b_.op(gelu ? OpType::GeGlu : OpType::SwiGlu, gelu ? "ffn_geglu" : "ffn_swiglu", layer_,
                  gate, n_, c.n_ff)
                .src0 = up;
            matmul("ffn_down", projected_, gate, l.ffn_down, hp_.n_embd);
            if (c.norms == NormPlacement::kPreAndPost)
                norm("ffn_post_norm", projected_, projected_, l.ffn_post_norm);
            add_residual("ffn_residual");
        }

        // Mixture of experts: the router picks k experts per token; each runs a SwiGLU
        // feed-forward on the token; their outputs are summed with the router's weights.
        void moe_block(const LayerConfig& c, const LayerWeights& l) {
            const int64_t k = c.n_expert_used;
            // gate and up read each token's row once for all its slots; down reads, per slot, the
            // output of that slot's expert.
            const MoeParams moe{c.n_expert, k, /*per_slot_input=*/false};
            const MoeParams per_slot{c.n_expert, k, /*per_slot_input=*/true};
            const BufferId logits = rows_of("moe_logits", c.n_expert),
                           experts = rows_of("moe_experts", k, DType::kI32),
                           weights = rows_of("moe_weights", k),
                           gate = rows_of("moe_gate", k * c.n_ff),
                           up = rows_of("moe_up", k * c.n_ff),
                           down = rows_of("moe_down", k * hp_.n_embd);
            norm("ffn_norm", normed_, residual_, l.ffn_norm);
            matmul("ffn_gate_inp", logits, normed_, l.router, c.n_expert);
            Op& r = b_.op(OpType::MoeRoute, "moe_route", layer_, experts, n_, k);
            r.src0 = logits;
            r.moe = moe;
            Op& w = b_.op(OpType::MoeWeights, "moe_weights", layer_, weights, n_, k);
            w.src0 = logits;
            w.src1 = experts;
            w.moe = moe;
            for (auto [label, dst, weight] : {std::tuple{"ffn_gate_exps", gate, &l.gate_exps},
                                              std::tuple{"ffn_up_exps", up, &l.up_exps}}) {
                Op& o = b_.op(OpType::MoeMatMul, label, layer_, dst, n_, k * c.n_ff);
                o.src0 = normed_;
                o.src1 = experts;
                o.weight = weight;
                o.moe = moe;
            }
            b_.op(OpType::SwiGlu, "moe_swiglu", layer_, gate, n_, k * c.n_ff).src0 = up;
            Op& d = b_.op(OpType::MoeMatMul, "ffn_down_exps", layer_, down, n_, k * hp_.n_embd);
            d.src0 = gate;
            d.src1 = experts;
            d.weight = &l.down_exps;
            d.moe = per_slot;
            Op& sum = b_.op(OpType::MoeCombine, "moe_combine", layer_, projected_, n_, hp_.n_embd);
            sum.src0 = down;
            sum.src1 = weights;
            sum.moe = moe;
            if (c.norms == NormPlacement::kPreAndPost)
                norm("ffn_post_norm", projected_, projected_, l.ffn_post_norm);
            add_residual("ffn_residual");
        }

        void output() {
            const int64_t m = g_.in.n_outputs();
            if (m == 0) return;
            const BufferId rows = b_.buffer("output_rows", m, hp_.n_embd);
            const BufferId rows_normed = b_.buffer("output_normed", m, hp_.n_embd);
            g_.logits = b_.buffer("logits", m, hp_.n_vocab);
            b_.op(OpType::SelectRows, "output_rows", -1, rows, m, hp_.n_embd).src0 = residual_;
            Op& norm = b_.op(OpType::RmsNorm, "output_norm", -1, rows_normed, m, hp_.n_embd);
            norm.src0 = rows;
            norm.weight = &m_.output_norm_;
            norm.eps = hp_.rms_eps;
            Op& out = b_.op(OpType::MatMul, "output", -1, g_.logits, m, hp_.n_vocab);
            out.src0 = rows_normed;
            out.weight = &m_.output_;
            if (m_.config_.final_softcap > 0.0f) {
                b_.op(OpType::SoftCap, "final_softcap", -1, g_.logits, m, hp_.n_vocab).factor =
                    m_.config_.final_softcap;
            }
        }

        const DecoderGraph& m_;
        const HParams& hp_;
        Graph& g_;
        GraphBuilder b_;
        const int64_t n_;
        const Weight* rope_factors_ = nullptr;
        int layer_ = -1;
        BufferId residual_ = kNoBuffer, normed_ = kNoBuffer, projected_ = kNoBuffer;
        std::map<std::pair<std::string, int64_t>, BufferId> by_width_;
    };

    ModelConfig config_;
    Weight token_embd_, output_norm_, output_, rope_freqs_, rope_long_, rope_short_;
    std::vector<LayerWeights> layers_;
};

}  // namespace

std::unique_ptr<ModelGraph> bind_decoder(WeightBinder& binder, const ModelConfig& config) {
    return std::make_unique<DecoderGraph>(binder, config);
}

}  // namespace minfer
