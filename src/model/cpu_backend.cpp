// The CPU backend: executes a Graph op by op with the kernels of src/kernels, splitting each op's
// rows (or heads) across a persistent thread pool. Activation buffers are sized once for the
// largest micro-batch; the logits buffer grows to the largest number of outputs asked for.

#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/vector_ops.h"
#include "model/backend.h"
#include "model/cpu_attention.h"
#include "model/kv_cache.h"
#include "model/rope_table.h"
#include "quant/dequantize.h"

namespace minfer {
namespace {

// Below this many output values an elementwise op runs on the calling thread: waking the pool
// costs more than the work.
constexpr int64_t kInlineElements = 1 << 14;

class CpuBackend final : public Backend {
public:
    CpuBackend(const Model& model, const BackendOptions& options)
        : model_(model),
          hp_(model.hparams()),
          options_(options),
          kv_(model.hparams(), options.n_ctx, options.kv_type),
          pool_(options.n_threads, options.pin_threads) {
        const int64_t rows = options.n_batch;
        if (rows < 1) throw UsageError(concat("batch size must be at least 1, got ", rows));
        const auto width = [&](Buf b) -> int64_t {
            switch (b) {
                case Buf::Residual: case Buf::Normed: case Buf::Projected: return hp_.n_embd;
                case Buf::Q: return hp_.q_width();
                case Buf::K: return hp_.kv_width();
                case Buf::V: return hp_.v_width();
                case Buf::AttnOut: return hp_.attn_out_width();
                case Buf::FfnGate: case Buf::FfnUp: return hp_.n_ff;
                default: return 0;
            }
        };
        for (int b = 0; b < kBufCount; ++b) {
            buffers_[b].resize(static_cast<std::size_t>(rows * width(static_cast<Buf>(b))));
        }
        attention_.resize(static_cast<std::size_t>(pool_.size()));
    }

    std::string_view name() const override { return "cpu"; }
    std::span<const float> logits() const override { return logits_view_; }
    std::size_t kv_cache_bytes() const override { return kv_.bytes(); }
    std::size_t scratch_bytes() const override {
        std::size_t n = scratch_.capacity();
        for (const auto& b : buffers_) n += b.size() * sizeof(float);
        return n;
    }

    void execute(const Graph& g) override {
        if (g.n_tokens > options_.n_batch) {
            throw UsageError(concat("a batch of ", g.n_tokens, " tokens exceeds the batch size ", options_.n_batch));
        }
        if (!g.positions.empty() && g.positions.back() >= kv_.n_ctx()) {
            throw UsageError(concat("position ", g.positions.back(), " is beyond the context length ", kv_.n_ctx()));
        }
        const std::size_t logits_size = static_cast<std::size_t>(g.n_outputs * hp_.n_vocab);
        if (buffers_[static_cast<int>(Buf::Logits)].size() < logits_size) {
            buffers_[static_cast<int>(Buf::Logits)].resize(logits_size);
        }
        rope_.prepare(hp_, model_.arch().rope_kind, model_.weights().rope_freqs, g.positions);
        for (const Op& op : g.ops) {
            if (options_.trace) {
                const auto start = std::chrono::steady_clock::now();
                run(op, g);
                const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
                options_.trace(op, took.count());
            } else {
                run(op, g);
            }
        }
        logits_view_ = std::span<const float>(buffers_[static_cast<int>(Buf::Logits)]).first(logits_size);
    }

private:
    float* buf(Buf b) { return buffers_[static_cast<int>(b)].data(); }

    // Runs fn(row_begin, row_end) over rows, split across the pool when the op is big enough.
    template <class F>
    void for_rows(int64_t rows, int64_t width, F&& fn) {
        if (rows * width < kInlineElements || pool_.size() == 1) {
            fn(int64_t{0}, rows);
            return;
        }
        pool_.run([&](int thread, int n_threads) {
            const int64_t begin = rows * thread / n_threads;
            const int64_t end = rows * (thread + 1) / n_threads;
            if (begin < end) fn(begin, end);
        });
    }

    void run(const Op& op, const Graph& g) {
        switch (op.type) {
            case OpType::GetRows: return get_rows(op, g);
            case OpType::RmsNorm: return rms_norm(op);
            case OpType::MatMul: return mat_mul(op);
            case OpType::AddBias: return add_bias(op);
            case OpType::HeadRmsNorm: return head_rms_norm(op);
            case OpType::Rope: return rope(op);
            case OpType::StoreKv: return store_kv(op, g);
            case OpType::Attention: return attention(op, g);
            case OpType::SwiGlu: return swiglu(op);
            case OpType::Add: return add(op);
            case OpType::SelectRows: return select_rows(op, g);
        }
    }

    void get_rows(const Op& op, const Graph& g) {
        const Weight& w = *op.weight;
        const std::size_t row_bytes = row_size(w.type(), w.n_cols());
        float* dst = buf(op.dst);
        for (int64_t t = 0; t < op.rows; ++t) {
            const int32_t id = g.tokens[static_cast<std::size_t>(t)];
            if (id < 0 || id >= w.n_rows()) {
                throw UsageError(concat("token id ", id, " is out of range (the model has ", w.n_rows(), " tokens)"));
            }
            dequantize_row(w.type(), w.data().data() + static_cast<std::size_t>(id) * row_bytes, dst + t * op.width,
                           op.width);
        }
    }

    // ggml's arithmetic: mean of squares summed in double, y = (x * (1 / sqrt(mean + eps))) * w.
    static void rms_norm_row(const float* x, const float* w, float* y, int64_t n, float eps) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
        const float mean = static_cast<float>(sum / static_cast<double>(n));
        const float scale = 1.0f / std::sqrt(mean + eps);
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * w[i];
    }

    void rms_norm(const Op& op) {
        const float* src = buf(op.src);
        float* dst = buf(op.dst);
        const float* w = op.weight->f32();
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) rms_norm_row(src + r * op.width, w, dst + r * op.width, op.width, hp_.rms_eps);
        });
    }

    void head_rms_norm(const Op& op) {
        float* x = buf(op.dst);
        const float* w = op.weight->f32();
        const int64_t heads = op.rows * (op.width / op.head_dim);
        for_rows(heads, op.head_dim, [&](int64_t begin, int64_t end) {
            for (int64_t h = begin; h < end; ++h) rms_norm_row(x + h * op.head_dim, w, x + h * op.head_dim, op.head_dim, hp_.rms_eps);
        });
    }

    void mat_mul(const Op& op) {
        const Weight& w = *op.weight;
        const WeightMatrix m{w.type(), w.n_cols(), w.n_rows(), w.data()};
        matmul(m, buf(op.src), op.rows, buf(op.dst), pool_, scratch_);
    }

    void add_bias(const Op& op) {
        float* x = buf(op.dst);
        const float* b = op.weight->f32();
        for (int64_t r = 0; r < op.rows; ++r) {
            for (int64_t i = 0; i < op.width; ++i) x[r * op.width + i] += b[i];
        }
    }

    void rope(const Op& op) {
        float* x = buf(op.dst);
        const int64_t heads = op.width / op.head_dim;
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                for (int64_t h = 0; h < heads; ++h) rope_.apply(x + t * op.width + h * op.head_dim, t);
            }
        });
    }

    void store_kv(const Op& op, const Graph& g) {
        const float* k = buf(Buf::K);
        const float* v = buf(Buf::V);
        for_rows(op.rows, hp_.kv_width() + hp_.v_width(), [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                const int64_t pos = g.positions[static_cast<std::size_t>(t)];
                store_row(k + t * hp_.kv_width(), kv_.k_row(op.layer, pos), hp_.kv_width());
                store_row(v + t * hp_.v_width(), kv_.v_row(op.layer, pos), hp_.v_width());
            }
        });
    }

    void store_row(const float* x, std::byte* dst, int64_t n) {
        switch (kv_.type()) {
            case GgmlType::F32: std::memcpy(dst, x, static_cast<std::size_t>(n) * sizeof(float)); break;
            case GgmlType::F16: convert_f32_to_f16(x, reinterpret_cast<uint16_t*>(dst), n); break;
            default: quantize_kv_row_q8_0(x, dst, n); break;
        }
    }

    void attention(const Op& op, const Graph& g) {
        const AttentionShape shape{hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v};
        const float* q = buf(Buf::Q);
        float* out = buf(op.dst);
        const int64_t tasks = op.rows * hp_.n_head;
        const auto work = [&](int thread, int n_threads) {
            AttentionWorkspace& ws = attention_[static_cast<std::size_t>(thread)];
            for (int64_t task = tasks * thread / n_threads; task < tasks * (thread + 1) / n_threads; ++task) {
                const int64_t t = task / hp_.n_head;
                const int64_t head = task % hp_.n_head;
                attend_one_head(shape, kv_, op.layer, head, g.positions[static_cast<std::size_t>(t)],
                                q + t * hp_.q_width() + head * hp_.head_dim_k,
                                out + t * hp_.attn_out_width() + head * hp_.head_dim_v, ws);
            }
        };
        if (pool_.size() == 1) {
            work(0, 1);
        } else {
            pool_.run(work);
        }
    }

    void swiglu(const Op& op) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src);
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin * op.width; i < end * op.width; ++i) {
                const float x = gate[i];
                gate[i] = x / (1.0f + std::exp(-x)) * up[i];
            }
        });
    }

    void add(const Op& op) {
        float* x = buf(op.dst);
        const float* y = buf(op.src);
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            for (int64_t i = begin * op.width; i < end * op.width; ++i) x[i] += y[i];
        });
    }

    void select_rows(const Op& op, const Graph& g) {
        const float* src = buf(op.src);
        float* dst = buf(op.dst);
        for (int64_t i = 0; i < op.rows; ++i) {
            const int64_t row = g.output_rows[static_cast<std::size_t>(i)];
            std::memmove(dst + i * op.width, src + row * op.width, static_cast<std::size_t>(op.width) * sizeof(float));
        }
    }

    const Model& model_;
    const HParams& hp_;
    BackendOptions options_;
    KvCache kv_;
    ThreadPool pool_;
    MatmulScratch scratch_;
    RopeTable rope_;
    std::array<std::vector<float>, kBufCount> buffers_;
    std::vector<AttentionWorkspace> attention_;
    std::span<const float> logits_view_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options) {
    return std::make_unique<CpuBackend>(model, options);
}

}  // namespace minfer
