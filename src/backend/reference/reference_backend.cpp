// The reference backend: see reference_backend.h. Every op is a plain loop over the shapes the
// graph declares; nothing is shared with the CPU backend's kernels.

#include "backend/reference/reference_backend.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>
#include <numeric>
#include <vector>

#include "backend/host_buffers.h"
#include "core/error.h"
#include "core/half.h"
#include "core/memory_limits.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace minfer {
namespace {

// Row r of a weight matrix [n_rows][n_cols] (any type), dequantized to f32.
std::vector<float> weight_row(const Weight& w, int64_t r) {
    const std::size_t row_bytes = row_size(w.type, w.n_cols());
    std::vector<float> row(static_cast<std::size_t>(w.n_cols()));
    dequantize_row(w.type, w.data.data() + static_cast<std::size_t>(r) * row_bytes, row.data(),
                   w.n_cols());
    return row;
}

// A 1-D f32 weight (norm weights, biases, RoPE frequency factors) as a vector.
std::vector<float> weight_vector(const Weight& w) {
    return weight_row(w, 0);
}

// y = x / sqrt(mean(x^2) + eps) * weight, over n values; y may alias x.
void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
    const double scale = 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(x[i] * scale * weight[i]);
}

// The value a cache of `type` gives back for the n values x (n a multiple of 32 for q8_0).
void round_like_cache(GgmlType type, const float* x, float* out, int64_t n) {
    if (type == GgmlType::F16) {
        for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(f32_to_f16(x[i]));
    } else if (type == GgmlType::Q8_0) {
        std::vector<block_q8_0> blocks(static_cast<std::size_t>(n / QK8_0));
        quantize_row_q8_0(x, blocks.data(), n);
        dequantize_row_q8_0(blocks.data(), out, n);
    } else {
        std::copy(x, x + n, out);
    }
}

class ReferenceBackend final : public Backend {
  public:
    explicit ReferenceBackend(const BackendOptions& options) : options_(options) {
        if (options_.n_vocab < 1)
            throw UsageError("the reference backend needs the vocabulary size");
        options_.kv.check();
        // Per cache layer: K [n_slots][n_head_kv * head_dim_k], V [n_slots][n_head_kv * head_dim_v]
        const auto n_slots = static_cast<std::size_t>(options_.kv.n_slots());
        // Kept as f32 whatever the cache type (twice an f16 cache): refused with the size before
        // std::bad_alloc could be.
        uint64_t values = 0;
        for (const KvLayerShape& s : options_.kv.layers)
            values += n_slots * static_cast<uint64_t>(s.n_head_kv * (s.head_dim_k + s.head_dim_v));
        require_memory(values * sizeof(float), "the reference backend's f32 KV cache",
                       "; lower --ctx");
        for (const KvLayerShape& s : options_.kv.layers) {
            KvLayer l;
            l.k_width = s.n_head_kv * s.head_dim_k;
            l.v_width = s.n_head_kv * s.head_dim_v;
            l.k.resize(n_slots * static_cast<std::size_t>(l.k_width));
            l.v.resize(n_slots * static_cast<std::size_t>(l.v_width));
            kv_.push_back(std::move(l));
        }
    }

    std::string_view name() const override { return "reference"; }
    std::span<const float> logits() const override { return logits_; }
    std::span<const float> activation_values(BufferId id, std::size_t count) const override {
        return buffers_.f32_values(id, count);
    }

    std::size_t kv_cache_bytes() const override {
        std::size_t n = 0;
        for (const KvLayer& l : kv_) n += (l.k.size() + l.v.size()) * sizeof(float);
        return n;
    }
    std::size_t scratch_bytes() const override { return buffers_.bytes(); }

    void copy_kv_block(int32_t from, int32_t to, int64_t n_positions) override {
        const int64_t block_size = options_.kv.block_size;
        if (from < 0 || from >= options_.kv.n_blocks || to < 0 || to >= options_.kv.n_blocks ||
            n_positions < 0 || n_positions > block_size)
            throw UsageError(concat("cannot copy cache block ", from, " to ", to));
        for (KvLayer& l : kv_) {
            for (int64_t i = 0; i < n_positions; ++i) {
                const int64_t src = from * block_size + i, dst = to * block_size + i;
                std::copy_n(k_row(l, src), l.k_width, k_row(l, dst));
                std::copy_n(v_row(l, src), l.v_width, v_row(l, dst));
            }
        }
    }

    void execute(const Graph& g) override {
        validate_graph_for(g, options_);
        // Zeroed buffers of the declared shapes [rows][width].
        buffers_.grow(g);
        buffers_.clear();
        buffers_.write_carried(g);
        for (const Op& op : g.ops) {
            const auto start = std::chrono::steady_clock::now();
            run(op, g.in);
            if (options_.trace) {
                const auto end = std::chrono::steady_clock::now();
                options_.trace(op, std::chrono::duration<double, std::micro>(end - start).count());
            }
        }
        logits_ = {};
        if (g.logits != kNoBuffer)
            logits_ = std::span<const float>(
                buffers_.f32(g.logits),
                static_cast<std::size_t>(g.in.n_outputs() * options_.n_vocab));
    }

  private:
    struct KvLayer {
        int64_t k_width = 0, v_width = 0;
        std::vector<float> k, v;  // [n_slots][k_width], [n_slots][v_width]
    };
    static float* k_row(KvLayer& l, int64_t slot) { return l.k.data() + slot * l.k_width; }
    static float* v_row(KvLayer& l, int64_t slot) { return l.v.data() + slot * l.v_width; }

    float* buf(BufferId b) { return buffers_.f32(b); }

    void run(const Op& op, const BatchInputs& in) {
        switch (op.type) {
            case OpType::GetRows:
                return get_rows(op, in);
            case OpType::RmsNorm:
                return rms_norm_rows(op);
            case OpType::MatMul:
                return matmul(op);
            case OpType::AddBias:
                return add_bias(op);
            case OpType::HeadRmsNorm:
                return head_rms_norm(op);
            case OpType::Rope:
                return rope(op, in);
            case OpType::StoreKv:
                return store_kv(op, in);
            case OpType::Attention:
                return attention(op, in);
            case OpType::SwiGlu:
                return swiglu(op);
            case OpType::Add:
                return add(op);
            case OpType::SelectRows:
                return select_rows(op, in);
            case OpType::GeGlu:
                return geglu(op);
            case OpType::Scale:
                return scale(op);
            case OpType::SoftCap:
                return softcap(op);
            case OpType::MoeRoute:
                return moe_route(op);
            case OpType::MoeWeights:
                return moe_weights(op);
            case OpType::MoeMatMul:
                return moe_matmul(op);
            case OpType::MoeCombine:
                return moe_combine(op);
        }
        throw UsageError("reference backend: unknown op type");
    }

    // dst [rows][width]: row t is row tokens[t] of the embedding table [n_vocab][width].
    void get_rows(const Op& op, const BatchInputs& in) {
        for (int64_t t = 0; t < op.rows; ++t) {
            const std::vector<float> row =
                weight_row(*op.weight, in.tokens[static_cast<std::size_t>(t)]);
            std::copy(row.begin(), row.end(), buf(op.dst) + t * op.width);
        }
    }

    // dst [rows][width] = rms_norm(src0 [rows][width]) * weight [width].
    void rms_norm_rows(const Op& op) {
        const std::vector<float> w = weight_vector(*op.weight);
        for (int64_t t = 0; t < op.rows; ++t)
            rms_norm(buf(op.src0) + t * op.width, w.data(), buf(op.dst) + t * op.width, op.width,
                     op.eps);
    }

    // dst [rows][width] = src0 [rows][n_in] · weight^T, weight [width][n_in].
    void matmul(const Op& op) {
        const int64_t n_in = op.weight->n_cols();
        const float* x = buf(op.src0);
        float* y = buf(op.dst);
        for (int64_t r = 0; r < op.width; ++r) {
            const std::vector<float> w = weight_row(*op.weight, r);
            // sums[t] = w · x[t], every token's dot product summed in column order.
            std::vector<double> sums(static_cast<std::size_t>(op.rows), 0.0);
            for (int64_t c = 0; c < n_in; ++c) {
                for (int64_t t = 0; t < op.rows; ++t)
                    sums[static_cast<std::size_t>(t)] +=
                        static_cast<double>(w[static_cast<std::size_t>(c)]) * x[t * n_in + c];
            }
            for (int64_t t = 0; t < op.rows; ++t)
                y[t * op.width + r] = static_cast<float>(sums[static_cast<std::size_t>(t)]);
        }
    }

    // dst [rows][width] += weight [width] on every row.
    void add_bias(const Op& op) {
        const std::vector<float> b = weight_vector(*op.weight);
        for (int64_t t = 0; t < op.rows; ++t)
            for (int64_t i = 0; i < op.width; ++i)
                buf(op.dst)[t * op.width + i] += b[static_cast<std::size_t>(i)];
    }

    // dst [rows][n_heads][head_dim]: every head rms-normed, times weight [head_dim].
    void head_rms_norm(const Op& op) {
        const std::vector<float> w = weight_vector(*op.weight);
        const int64_t n_heads = op.rows * (op.width / op.head_dim);
        for (int64_t h = 0; h < n_heads; ++h) {
            float* head = buf(op.dst) + h * op.head_dim;
            rms_norm(head, w.data(), head, op.head_dim, op.eps);
        }
    }

    // dst [rows][n_heads][head_dim]: pair i (of n_dims / 2) of every head rotates by the angle
    // position * freq_scale * freq_base^(-2i / n_dims) / factor[i] and is multiplied by
    // attn_factor. Normal style pairs values (2i, 2i + 1), neox style (i, i + n_dims / 2); values
    // from n_dims on stay.
    void rope(const Op& op, const BatchInputs& in) {
        const RopeParams& p = op.rope;
        const int64_t half = p.n_dims / 2;
        std::vector<float> factors(static_cast<std::size_t>(half), 1.0f);
        if (op.weight != nullptr && *op.weight) factors = weight_vector(*op.weight);
        const int64_t n_heads = op.width / op.head_dim;
        for (int64_t t = 0; t < op.rows; ++t) {
            const double pos = in.positions[static_cast<std::size_t>(t)];
            for (int64_t i = 0; i < half; ++i) {
                const double freq =
                    std::pow(static_cast<double>(p.freq_base),
                             -2.0 * static_cast<double>(i) / static_cast<double>(p.n_dims));
                const double angle =
                    pos * p.freq_scale * freq / factors[static_cast<std::size_t>(i)];
                const double c = std::cos(angle) * p.attn_factor,
                             s = std::sin(angle) * p.attn_factor;
                for (int64_t h = 0; h < n_heads; ++h) {
                    float* v = buf(op.dst) + t * op.width + h * op.head_dim;
                    const int64_t a = p.style == RopeStyle::kNormal ? 2 * i : i;
                    const int64_t b = p.style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
                    const double x0 = v[a], x1 = v[b];
                    v[a] = static_cast<float>(x0 * c - x1 * s);
                    v[b] = static_cast<float>(x0 * s + x1 * c);
                }
            }
        }
    }

    // K = src0 [rows][n_head_kv * head_dim_k] and V = src1 [rows][n_head_kv * head_dim_v]: row t
    // goes to cache slot kv_slots[t] of cache layer kv_layer.
    void store_kv(const Op& op, const BatchInputs& in) {
        KvLayer& l = kv_[static_cast<std::size_t>(op.kv_layer)];
        for (int64_t t = 0; t < op.rows; ++t) {
            const int64_t slot = in.kv_slots[static_cast<std::size_t>(t)];
            round_like_cache(options_.kv.type, buf(op.src0) + t * l.k_width, k_row(l, slot),
                             l.k_width);
            round_like_cache(options_.kv.type, buf(op.src1) + t * l.v_width, v_row(l, slot),
                             l.v_width);
        }
    }

    // dst [rows][n_head * head_dim_v] from Q = src0 [rows][n_head * head_dim_k]: query head h of
    // token t attends to K/V head h / (n_head / n_head_kv) at the positions first .. pos of the
    // token's own sequence (first = pos - window + 1 with a window, else 0), found through the
    // sequence's block table.
    void attention(const Op& op, const BatchInputs& in) {
        const AttentionParams& a = op.attn;
        KvLayer& l = kv_[static_cast<std::size_t>(op.kv_layer)];
        const int64_t block_size = options_.kv.block_size;
        const int64_t group = a.n_head / a.n_head_kv;
        for (int64_t t = 0; t < op.rows; ++t) {
            const int64_t pos = in.positions[static_cast<std::size_t>(t)];
            const std::span<const int32_t> table =
                in.block_table(in.sequence[static_cast<std::size_t>(t)]);
            const int64_t first = a.first_position(pos);
            for (int64_t h = 0; h < a.n_head; ++h) {
                const int64_t kv_head = h / group;
                const float* q = buf(op.src0) + t * a.n_head * a.head_dim_k + h * a.head_dim_k;
                // scores[p - first] = scale * q · k_p, softcapped.
                std::vector<double> scores;
                std::vector<const float*> values;
                double max = -INFINITY;
                for (int64_t p = first; p <= pos; ++p) {
                    const int64_t slot =
                        int64_t{table[static_cast<std::size_t>(p / block_size)]} * block_size +
                        p % block_size;
                    const float* k = k_row(l, slot) + kv_head * a.head_dim_k;
                    double dot = 0.0;
                    for (int64_t d = 0; d < a.head_dim_k; ++d)
                        dot += static_cast<double>(q[d]) * k[d];
                    double score = a.scale * dot;
                    if (a.softcap > 0.0f) score = a.softcap * std::tanh(score / a.softcap);
                    scores.push_back(score);
                    max = std::max(max, score);
                    values.push_back(v_row(l, slot) + kv_head * a.head_dim_v);
                }
                // Softmax over the scores, then the weighted sum of the values.
                double sum = 0.0;
                for (double& s : scores) {
                    s = std::exp(s - max);
                    sum += s;
                }
                float* out = buf(op.dst) + t * op.width + h * a.head_dim_v;
                for (int64_t d = 0; d < a.head_dim_v; ++d) {
                    double acc = 0.0;
                    for (std::size_t i = 0; i < scores.size(); ++i)
                        acc += scores[i] / sum * values[i][d];
                    out[d] = static_cast<float>(acc);
                }
            }
        }
    }

    // dst [rows][width] = silu(dst) * src0.
    void swiglu(const Op& op) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src0);
        for (int64_t i = 0; i < op.rows * op.width; ++i) {
            const double g = gate[i];
            gate[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
        }
    }

    // dst [rows][width] = gelu(dst) * src0, GELU's tanh approximation.
    void geglu(const Op& op) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src0);
        for (int64_t i = 0; i < op.rows * op.width; ++i) {
            const double g = gate[i];
            const double gelu =
                0.5 * g *
                (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
            gate[i] = static_cast<float>(gelu * up[i]);
        }
    }

    // dst [rows][width] *= factor.
    void scale(const Op& op) {
        for (int64_t i = 0; i < op.rows * op.width; ++i) buf(op.dst)[i] *= op.factor;
    }

    // dst [rows][width] = factor * tanh(dst / factor).
    void softcap(const Op& op) {
        for (int64_t i = 0; i < op.rows * op.width; ++i) {
            const double x = buf(op.dst)[i];
            buf(op.dst)[i] = static_cast<float>(op.factor * std::tanh(x / op.factor));
        }
    }

    // The router probabilities of token t: the softmax of src0 [rows][n_expert].
    std::vector<double> router_probabilities(const Op& op, int64_t t) {
        const int64_t n_expert = op.moe.n_expert;
        const float* logits = buf(op.src0) + t * n_expert;
        const double max = *std::max_element(logits, logits + n_expert);
        std::vector<double> p(static_cast<std::size_t>(n_expert));
        double sum = 0.0;
        for (int64_t e = 0; e < n_expert; ++e)
            sum += p[static_cast<std::size_t>(e)] = std::exp(logits[e] - max);
        for (double& x : p) x /= sum;
        return p;
    }

    // dst i32 [rows][k]: the k experts of the highest router probability, highest first (the
    // lower id on a tie).
    void moe_route(const Op& op) {
        const int64_t k = op.moe.n_used;
        for (int64_t t = 0; t < op.rows; ++t) {
            const std::vector<double> p = router_probabilities(op, t);
            std::vector<int32_t> order(p.size());
            std::iota(order.begin(), order.end(), 0);
            std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
                return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)];
            });
            std::copy_n(order.begin(), k, buffers_.i32(op.dst) + t * k);
        }
    }

    // dst [rows][k]: the router probabilities of the experts src1 [rows][k] picked, divided by
    // their sum.
    void moe_weights(const Op& op) {
        const int64_t k = op.moe.n_used;
        for (int64_t t = 0; t < op.rows; ++t) {
            const std::vector<double> p = router_probabilities(op, t);
            const int32_t* ids = buffers_.i32(op.src1) + t * k;
            double picked = 0.0;
            for (int64_t j = 0; j < k; ++j) picked += p[static_cast<std::size_t>(ids[j])];
            for (int64_t j = 0; j < k; ++j)
                buf(op.dst)[t * k + j] =
                    static_cast<float>(p[static_cast<std::size_t>(ids[j])] / picked);
        }
    }

    // dst [rows][k][width]: slot j of token t = x · (matrix expert(t, j) of the 3-D weight)^T,
    // x = src0 row t, or its slot j with moe.per_slot_input.
    void moe_matmul(const Op& op) {
        const Weight& w = *op.weight;
        const int64_t k = op.moe.n_used, n_in = w.ne[0], n_out = w.ne[1];
        const int32_t* experts = buffers_.i32(op.src1);
        for (int64_t e = 0; e < op.moe.n_expert; ++e) {
            std::vector<std::pair<int64_t, int64_t>> picked;  // (token, slot)
            for (int64_t t = 0; t < op.rows; ++t)
                for (int64_t j = 0; j < k; ++j)
                    if (experts[t * k + j] == e) picked.emplace_back(t, j);
            if (picked.empty()) continue;
            const Weight m = w.matrix(e);
            for (int64_t r = 0; r < n_out; ++r) {
                const std::vector<float> row = weight_row(m, r);
                for (const auto& [t, j] : picked) {
                    const float* x =
                        buf(op.src0) + (op.moe.per_slot_input ? (t * k + j) * n_in : t * n_in);
                    double dot = 0.0;
                    for (int64_t c = 0; c < n_in; ++c)
                        dot += static_cast<double>(row[static_cast<std::size_t>(c)]) * x[c];
                    buf(op.dst)[(t * k + j) * n_out + r] = static_cast<float>(dot);
                }
            }
        }
    }

    // dst [rows][width] = sum over slots of weight(t, j) * src0[t][j], the weights src1 [rows][k].
    void moe_combine(const Op& op) {
        const int64_t k = op.moe.n_used;
        for (int64_t t = 0; t < op.rows; ++t) {
            const float* weights = buf(op.src1) + t * k;
            for (int64_t i = 0; i < op.width; ++i) {
                double sum = 0.0;
                for (int64_t j = 0; j < k; ++j)
                    sum +=
                        static_cast<double>(weights[j]) * buf(op.src0)[(t * k + j) * op.width + i];
                buf(op.dst)[t * op.width + i] = static_cast<float>(sum);
            }
        }
    }

    // dst [rows][width] += src0 [rows][width].
    void add(const Op& op) {
        for (int64_t i = 0; i < op.rows * op.width; ++i) buf(op.dst)[i] += buf(op.src0)[i];
    }

    // dst [n_outputs][width]: row i is row output_rows[i] of src0 [n_tokens][width].
    void select_rows(const Op& op, const BatchInputs& in) {
        for (int64_t i = 0; i < op.rows; ++i) {
            const int64_t row = in.output_rows[static_cast<std::size_t>(i)];
            std::copy_n(buf(op.src0) + row * op.width, op.width, buf(op.dst) + i * op.width);
        }
    }

    BackendOptions options_;
    std::vector<KvLayer> kv_;  // per cache layer
    HostBuffers buffers_;      // by BufferId of the graphs executed
    std::span<const float> logits_;
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend(const BackendOptions& options) {
    return std::make_unique<ReferenceBackend>(options);
}

}  // namespace minfer
