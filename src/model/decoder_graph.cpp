#include "model/decoder_graph.h"

namespace minfer {
namespace {

class Recorder {
  public:
    explicit Recorder(Graph& g) : g_(g) {}

    void op(OpType type, const char* label, int layer, Buf dst, Buf src, const Weight* w,
            int64_t rows, int64_t width, int64_t head_dim = 0) {
        g_.ops.push_back(Op{type, label, layer, dst, src, w, rows, width, head_dim});
    }

  private:
    Graph& g_;
};

}  // namespace

Graph build_decoder_graph(const Architecture& arch, const HParams& hp, const ModelWeights& w,
                          std::span<const int32_t> tokens, int32_t pos0,
                          std::span<const int32_t> output_rows) {
    Graph g;
    const int64_t n = static_cast<int64_t>(tokens.size());
    g.n_tokens = n;
    g.n_outputs = static_cast<int64_t>(output_rows.size());
    g.tokens.assign(tokens.begin(), tokens.end());
    g.output_rows.assign(output_rows.begin(), output_rows.end());
    g.positions.resize(tokens.size());
    for (int64_t i = 0; i < n; ++i)
        g.positions[static_cast<std::size_t>(i)] = pos0 + static_cast<int32_t>(i);

    Recorder r(g);
    r.op(OpType::GetRows, "token_embd", -1, Buf::Residual, Buf::None, &w.token_embd, n, hp.n_embd);
    for (int il = 0; il < static_cast<int>(hp.n_layer); ++il) {
        const LayerWeights& l = w.layers[static_cast<std::size_t>(il)];
        // Attention block.
        r.op(OpType::RmsNorm, "attn_norm", il, Buf::Normed, Buf::Residual, &l.attn_norm, n,
             hp.n_embd);
        r.op(OpType::MatMul, "attn_q", il, Buf::Q, Buf::Normed, &l.wq, n, hp.q_width());
        r.op(OpType::MatMul, "attn_k", il, Buf::K, Buf::Normed, &l.wk, n, hp.kv_width());
        r.op(OpType::MatMul, "attn_v", il, Buf::V, Buf::Normed, &l.wv, n, hp.v_width());
        if (arch.qkv_bias) {
            r.op(OpType::AddBias, "attn_q.bias", il, Buf::Q, Buf::None, &l.bq, n, hp.q_width());
            r.op(OpType::AddBias, "attn_k.bias", il, Buf::K, Buf::None, &l.bk, n, hp.kv_width());
            r.op(OpType::AddBias, "attn_v.bias", il, Buf::V, Buf::None, &l.bv, n, hp.v_width());
        }
        if (arch.qk_norm) {
            r.op(OpType::HeadRmsNorm, "attn_q_norm", il, Buf::Q, Buf::None, &l.q_norm, n,
                 hp.q_width(), hp.head_dim_k);
            r.op(OpType::HeadRmsNorm, "attn_k_norm", il, Buf::K, Buf::None, &l.k_norm, n,
                 hp.kv_width(), hp.head_dim_k);
        }
        r.op(OpType::Rope, "rope_q", il, Buf::Q, Buf::None, &w.rope_freqs, n, hp.q_width(),
             hp.head_dim_k);
        r.op(OpType::Rope, "rope_k", il, Buf::K, Buf::None, &w.rope_freqs, n, hp.kv_width(),
             hp.head_dim_k);
        r.op(OpType::StoreKv, "kv_store", il, Buf::None, Buf::K, nullptr, n, hp.kv_width(),
             hp.head_dim_k);
        r.op(OpType::Attention, "attention", il, Buf::AttnOut, Buf::Q, nullptr, n,
             hp.attn_out_width(), hp.head_dim_k);
        r.op(OpType::MatMul, "attn_output", il, Buf::Projected, Buf::AttnOut, &l.wo, n, hp.n_embd);
        r.op(OpType::Add, "attn_residual", il, Buf::Residual, Buf::Projected, nullptr, n,
             hp.n_embd);
        // Feed-forward block (SwiGLU).
        r.op(OpType::RmsNorm, "ffn_norm", il, Buf::Normed, Buf::Residual, &l.ffn_norm, n,
             hp.n_embd);
        r.op(OpType::MatMul, "ffn_gate", il, Buf::FfnGate, Buf::Normed, &l.ffn_gate, n, hp.n_ff);
        r.op(OpType::MatMul, "ffn_up", il, Buf::FfnUp, Buf::Normed, &l.ffn_up, n, hp.n_ff);
        r.op(OpType::SwiGlu, "ffn_swiglu", il, Buf::FfnGate, Buf::FfnUp, nullptr, n, hp.n_ff);
        r.op(OpType::MatMul, "ffn_down", il, Buf::Projected, Buf::FfnGate, &l.ffn_down, n,
             hp.n_embd);
        r.op(OpType::Add, "ffn_residual", il, Buf::Residual, Buf::Projected, nullptr, n, hp.n_embd);
    }
    if (g.n_outputs > 0) {
        const int64_t m = g.n_outputs;
        r.op(OpType::SelectRows, "output_rows", -1, Buf::Projected, Buf::Residual, nullptr, m,
             hp.n_embd);
        r.op(OpType::RmsNorm, "output_norm", -1, Buf::Normed, Buf::Projected, &w.output_norm, m,
             hp.n_embd);
        r.op(OpType::MatMul, "output", -1, Buf::Logits, Buf::Normed, &w.output, m, hp.n_vocab);
    }
    return g;
}

}  // namespace minfer
