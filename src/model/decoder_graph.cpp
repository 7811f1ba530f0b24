#include "model/decoder_graph.h"

#include <map>
#include <string>
#include <tuple>

namespace minfer {
namespace {

struct LayerWeights {
    Weight attn_norm;                // [n_embd] f32
    Weight wq, wk, wv, wo;           // [n_embd -> q_width], [-> kv_width], [-> v_width],
                                     // [attn_out_width -> n_embd]
    Weight bq, bk, bv;               // biases [q_width], [kv_width], [v_width] (qkv_bias)
    Weight q_norm, k_norm;           // per-head norms [head_dim_k] (qk_norm)
    Weight ffn_norm;                 // [n_embd]
    Weight ffn_gate, ffn_up;         // [n_embd -> n_ff]
    Weight ffn_down;                 // [n_ff -> n_embd]
};

class DecoderGraph final : public ModelGraph {
  public:
    DecoderGraph(WeightBinder& bind, const ModelConfig& config) : config_(config) {
        const HParams& hp = config.hp;
        token_embd_ = bind.embeddings("token_embd.weight", hp.n_embd, hp.n_vocab);
        output_norm_ = bind.vector("output_norm.weight", hp.n_embd);
        output_ = bind.matrix("output.weight", hp.n_embd, hp.n_vocab, /*required=*/false);
        if (!output_) output_ = bind.matrix("token_embd.weight", hp.n_embd, hp.n_vocab);  // tied
        rope_freqs_ = bind.vector("rope_freqs.weight", hp.n_rot / 2, /*required=*/false);
        layers_.resize(config.layers.size());
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            const LayerConfig& c = config.layers[i];
            LayerWeights& l = layers_[i];
            const auto name = [i](const char* suffix) { return concat("blk.", i, ".", suffix); };
            l.attn_norm = bind.vector(name("attn_norm.weight"), hp.n_embd);
            l.wq = bind.matrix(name("attn_q.weight"), hp.n_embd, c.q_width());
            l.wk = bind.matrix(name("attn_k.weight"), hp.n_embd, c.kv_width());
            l.wv = bind.matrix(name("attn_v.weight"), hp.n_embd, c.v_width());
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
            l.ffn_gate = bind.matrix(name("ffn_gate.weight"), hp.n_embd, c.n_ff);
            l.ffn_up = bind.matrix(name("ffn_up.weight"), hp.n_embd, c.n_ff);
            l.ffn_down = bind.matrix(name("ffn_down.weight"), c.n_ff, hp.n_embd);
        }
    }

    Graph record(BatchInputs in, int64_t kv_block_size) const override {
        Graph g;
        g.in = std::move(in);
        g.kv_block_size = kv_block_size;
        GraphBuilder b(g);
        const HParams& hp = config_.hp;
        const int64_t n = g.in.n_tokens();
        const float eps = hp.rms_eps;
        // Buffers of the whole batch; those whose width depends on the layer come one per width.
        std::map<std::pair<std::string, int64_t>, BufferId> by_width;
        const auto rows_of = [&](const char* name, int64_t width) {
            auto [it, added] = by_width.try_emplace({name, width}, kNoBuffer);
            if (added) it->second = b.buffer(name, n, width);
            return it->second;
        };
        const BufferId residual = b.buffer("residual", n, hp.n_embd);
        const BufferId normed = b.buffer("normed", n, hp.n_embd);
        const BufferId projected = b.buffer("projected", n, hp.n_embd);

        b.op(OpType::GetRows, "token_embd", -1, residual, n, hp.n_embd).weight = &token_embd_;
        for (std::size_t i = 0; i < layers_.size(); ++i) {
            const LayerConfig& c = config_.layers[i];
            const LayerWeights& l = layers_[i];
            const int il = static_cast<int>(i);
            const BufferId q = rows_of("q", c.q_width()), k = rows_of("k", c.kv_width()),
                           v = rows_of("v", c.v_width()),
                           attn_out = rows_of("attn_out", c.attn_out_width()),
                           gate = rows_of("ffn_gate", c.n_ff), up = rows_of("ffn_up", c.n_ff);
            const AttentionParams attn{c.n_head,     c.n_head_kv,    c.head_dim_k, c.head_dim_v,
                                       c.attn_scale, c.attn_softcap, c.attn_window};
            const auto matmul = [&](const char* label, BufferId dst, BufferId src, const Weight& w,
                                    int64_t width) {
                Op& o = b.op(OpType::MatMul, label, il, dst, n, width);
                o.src0 = src;
                o.weight = &w;
            };
            const auto norm = [&](const char* label, BufferId dst, BufferId src, const Weight& w) {
                Op& o = b.op(OpType::RmsNorm, label, il, dst, n, hp.n_embd);
                o.src0 = src;
                o.weight = &w;
                o.eps = eps;
            };
            // Attention block.
            norm("attn_norm", normed, residual, l.attn_norm);
            matmul("attn_q", q, normed, l.wq, c.q_width());
            matmul("attn_k", k, normed, l.wk, c.kv_width());
            matmul("attn_v", v, normed, l.wv, c.v_width());
            if (c.qkv_bias) {
                b.op(OpType::AddBias, "attn_q.bias", il, q, n, c.q_width()).weight = &l.bq;
                b.op(OpType::AddBias, "attn_k.bias", il, k, n, c.kv_width()).weight = &l.bk;
                b.op(OpType::AddBias, "attn_v.bias", il, v, n, c.v_width()).weight = &l.bv;
            }
            if (c.qk_norm) {
                for (auto [label, dst, width, w] :
                     {std::tuple{"attn_q_norm", q, c.q_width(), &l.q_norm},
                      std::tuple{"attn_k_norm", k, c.kv_width(), &l.k_norm}}) {
                    Op& o = b.op(OpType::HeadRmsNorm, label, il, dst, n, width);
                    o.weight = w;
                    o.head_dim = c.head_dim_k;
                    o.eps = eps;
                }
            }
            for (auto [label, dst, width] :
                 {std::tuple{"rope_q", q, c.q_width()}, std::tuple{"rope_k", k, c.kv_width()}}) {
                Op& o = b.op(OpType::Rope, label, il, dst, n, width);
                o.weight = rope_freqs_ ? &rope_freqs_ : nullptr;
                o.head_dim = c.head_dim_k;
                o.rope = c.rope;
            }
            Op& store = b.op(OpType::StoreKv, "kv_store", il, kNoBuffer, n, c.kv_width());
            store.src0 = k;
            store.src1 = v;
            store.attn = attn;
            store.kv_layer = il;
            Op& attention = b.op(OpType::Attention, "attention", il, attn_out, n, c.attn_out_width());
            attention.src0 = q;
            attention.attn = attn;
            attention.kv_layer = il;
            matmul("attn_output", projected, attn_out, l.wo, hp.n_embd);
            b.op(OpType::Add, "attn_residual", il, residual, n, hp.n_embd).src0 = projected;
            // Feed-forward block (SwiGLU).
            norm("ffn_norm", normed, residual, l.ffn_norm);
            matmul("ffn_gate", gate, normed, l.ffn_gate, c.n_ff);
            matmul("ffn_up", up, normed, l.ffn_up, c.n_ff);
            b.op(OpType::SwiGlu, "ffn_swiglu", il, gate, n, c.n_ff).src0 = up;
            matmul("ffn_down", projected, gate, l.ffn_down, hp.n_embd);
            b.op(OpType::Add, "ffn_residual", il, residual, n, hp.n_embd).src0 = projected;
        }
        const int64_t m = g.in.n_outputs();
        if (m > 0) {
            const BufferId rows = b.buffer("output_rows", m, hp.n_embd);
            const BufferId rows_normed = b.buffer("output_normed", m, hp.n_embd);
            g.logits = b.buffer("logits", m, hp.n_vocab);
            b.op(OpType::SelectRows, "output_rows", -1, rows, m, hp.n_embd).src0 = residual;
            Op& norm = b.op(OpType::RmsNorm, "output_norm", -1, rows_normed, m, hp.n_embd);
            norm.src0 = rows;
            norm.weight = &output_norm_;
            norm.eps = eps;
            Op& out = b.op(OpType::MatMul, "output", -1, g.logits, m, hp.n_vocab);
            out.src0 = rows_normed;
            out.weight = &output_;
        }
        return g;
    }

  private:
    ModelConfig config_;
    Weight token_embd_, output_norm_, output_, rope_freqs_;
    std::vector<LayerWeights> layers_;
};

}  // namespace

std::unique_ptr<ModelGraph> bind_decoder(WeightBinder& binder, const ModelConfig& config) {
    return std::make_unique<DecoderGraph>(binder, config);
}

}  // namespace minfer
