// The CPU backend: executes a Graph op by op with the kernels of src/kernels, splitting each op's
// rows (or heads) across a persistent thread pool. Activation buffers are sized once for the
// largest micro-batch; the logits buffer grows to the largest number of outputs asked for.

#include <array>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/backend.h"
#include "model/cpu_attention.h"
#include "model/kv_cache.h"

namespace minfer {
namespace {

// Below this many values an elementwise op runs on the calling thread: waking the pool costs more
// than the work.
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
        for (int b = 0; b < kBufCount; ++b) {
            buffers_[b].resize(static_cast<std::size_t>(rows * buffer_width(static_cast<Buf>(b))));
        }
        attention_.resize(static_cast<std::size_t>(pool_.size()));
        rope_.style = model.arch().rope_kind == RopeKind::Neox ? RopeStyle::kNeox : RopeStyle::kNormal;
        rope_.head_dim = hp_.head_dim_k;
        rope_.n_dims = hp_.n_rot;
        rope_.freq_base = hp_.rope_freq_base;
        rope_.freq_scale = hp_.rope_freq_scale;
        rope_.freq_factors = model.weights().rope_freqs ? model.weights().rope_freqs.f32() : nullptr;
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
        auto& logits = buffers_[static_cast<int>(Buf::Logits)];
        if (logits.size() < logits_size) logits.resize(logits_size);
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
        logits_view_ = std::span<const float>(logits).first(logits_size);
    }

private:
    int64_t buffer_width(Buf b) const {
        switch (b) {
            case Buf::Residual: case Buf::Normed: case Buf::Projected: return hp_.n_embd;
            case Buf::Q: return hp_.q_width();
            case Buf::K: return hp_.kv_width();
            case Buf::V: return hp_.v_width();
            case Buf::AttnOut: return hp_.attn_out_width();
            case Buf::FfnGate: case Buf::FfnUp: return hp_.n_ff;
            default: return 0;  // the logits grow on demand
        }
    }

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
            case OpType::Rope: return rope(op, g);
            case OpType::StoreKv: return store_kv(op, g);
            case OpType::Attention: return attention(op, g);
            case OpType::SwiGlu: return swiglu(op);
            case OpType::Add: return add(op);
            case OpType::SelectRows: return select_rows(op, g);
        }
    }

    void get_rows(const Op& op, const Graph& g) {
        const Weight& w = *op.weight;
        minfer::get_rows(WeightMatrix{w.type(), w.n_cols(), w.n_rows(), w.data()},
                         std::span(g.tokens).first(static_cast<std::size_t>(op.rows)), buf(op.dst));
    }

    void rms_norm(const Op& op) {
        const float* src = buf(op.src);
        float* dst = buf(op.dst);
        const float* w = op.weight->f32();
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            for (int64_t r = begin; r < end; ++r) minfer::rms_norm(src + r * op.width, w, dst + r * op.width, op.width, hp_.rms_eps);
        });
    }

    void head_rms_norm(const Op& op) {
        float* x = buf(op.dst);
        const float* w = op.weight->f32();
        const int64_t heads = op.rows * (op.width / op.head_dim);
        for_rows(heads, op.head_dim, [&](int64_t begin, int64_t end) {
            for (int64_t h = begin; h < end; ++h) minfer::rms_norm(x + h * op.head_dim, w, x + h * op.head_dim, op.head_dim, hp_.rms_eps);
        });
    }

    void mat_mul(const Op& op) {
        const Weight& w = *op.weight;
        matmul(WeightMatrix{w.type(), w.n_cols(), w.n_rows(), w.data()}, buf(op.src), op.rows, buf(op.dst), pool_, scratch_);
    }

    void add_bias(const Op& op) {
        float* x = buf(op.dst);
        const float* b = op.weight->f32();
        for (int64_t r = 0; r < op.rows; ++r) minfer::add(x + r * op.width, b, x + r * op.width, op.width);
    }

    void rope(const Op& op, const Graph& g) {
        const int64_t heads = op.width / op.head_dim;
        float* x = buf(op.dst);
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            minfer::rope(x + begin * op.width, end - begin, heads, std::span(g.positions).subspan(static_cast<std::size_t>(begin)),
                         rope_);
        });
    }

    void store_kv(const Op& op, const Graph& g) {
        const float* k = buf(Buf::K);
        const float* v = buf(Buf::V);
        for_rows(op.rows, hp_.kv_width() + hp_.v_width(), [&](int64_t begin, int64_t end) {
            for (int64_t t = begin; t < end; ++t) {
                kv_.store(op.layer, g.positions[static_cast<std::size_t>(t)], k + t * hp_.kv_width(), v + t * hp_.v_width());
            }
        });
    }

    void attention(const Op& op, const Graph& g) {
        const AttentionShape shape{hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v};
        const float* q = buf(Buf::Q);
        float* out = buf(op.dst);
        // One task per (token, K/V head): the query heads of a group share every K and V row.
        // Later tokens attend to more positions, so threads take tasks round robin.
        const int64_t tasks = op.rows * hp_.n_head_kv;
        const auto work = [&](int thread, int n_threads) {
            AttentionWorkspace& ws = attention_[static_cast<std::size_t>(thread)];
            for (int64_t task = thread; task < tasks; task += n_threads) {
                const int64_t t = task / hp_.n_head_kv;
                attend_kv_group(shape, kv_, op.layer, task % hp_.n_head_kv, g.positions[static_cast<std::size_t>(t)],
                                q + t * hp_.q_width(), out + t * hp_.attn_out_width(), ws);
            }
        };
        if (pool_.size() == 1 || tasks == 1) {
            work(0, 1);
        } else {
            pool_.run(work);
        }
    }

    void swiglu(const Op& op) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src);
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            const int64_t offset = begin * op.width;
            minfer::swiglu(gate + offset, up + offset, gate + offset, (end - begin) * op.width);
        });
    }

    void add(const Op& op) {
        float* x = buf(op.dst);
        const float* y = buf(op.src);
        for_rows(op.rows, op.width, [&](int64_t begin, int64_t end) {
            const int64_t offset = begin * op.width;
            minfer::add(x + offset, y + offset, x + offset, (end - begin) * op.width);
        });
    }

    void select_rows(const Op& op, const Graph& g) {
        const float* src = buf(op.src);
        float* dst = buf(op.dst);
        for (int64_t i = 0; i < op.rows; ++i) {
            const int64_t row = g.output_rows[static_cast<std::size_t>(i)];
            std::memcpy(dst + i * op.width, src + row * op.width, static_cast<std::size_t>(op.width) * sizeof(float));
        }
    }

    const Model& model_;
    const HParams& hp_;
    BackendOptions options_;
    KvCache kv_;
    ThreadPool pool_;
    MatmulScratch scratch_;
    RopeConfig rope_;
    std::array<std::vector<float>, kBufCount> buffers_;
    std::vector<AttentionWorkspace> attention_;
    std::span<const float> logits_view_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options) {
    return std::make_unique<CpuBackend>(model, options);
}

}  // namespace minfer
