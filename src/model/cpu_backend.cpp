// The CPU backend: executes a whole Graph in one ThreadPool::run. Every thread walks the op list;
// each op splits its rows (or heads, or matrix rows) across the threads, and a spinning barrier
// separates ops. Small ops run on thread 0 alone, and consecutive such ops need no barrier, so a
// decode step costs one wake-up of the pool instead of one per op. Matmuls that read the same
// input (Q, K, V; gate, up) convert it once. Activation buffers are sized once for the largest
// micro-batch; the logits buffer grows to the largest number of outputs asked for.

#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <vector>

#include "core/error.h"
#include "core/spin_barrier.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/backend.h"
#include "model/cpu_attention.h"
#include "model/kv_cache.h"

namespace minfer {
namespace {

// Below this many values an op runs on thread 0 alone: sharing it costs more than the work.
constexpr int64_t kSerialElements = 1 << 14;

// [begin, end) of `count` items for thread i of n.
std::pair<int64_t, int64_t> share(int64_t count, int i, int n) {
    return {count * i / n, count * (i + 1) / n};
}

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
        rope_.style =
            model.arch().rope_kind == RopeKind::Neox ? RopeStyle::kNeox : RopeStyle::kNormal;
        rope_.head_dim = hp_.head_dim_k;
        rope_.n_dims = hp_.n_rot;
        rope_.freq_base = hp_.rope_freq_base;
        rope_.freq_scale = hp_.rope_freq_scale;
        rope_.freq_factors =
            model.weights().rope_freqs ? model.weights().rope_freqs.f32() : nullptr;
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
        validate(g);
        const std::size_t logits_size = static_cast<std::size_t>(g.n_outputs * hp_.n_vocab);
        auto& logits = buffers_[static_cast<int>(Buf::Logits)];
        if (logits.size() < logits_size) logits.resize(logits_size);
        plan(g);
        SpinBarrier barrier(pool_.size());
        auto last = std::chrono::steady_clock::now();
        pool_.run([&](int thread, int n_threads) {
            for (std::size_t i = 0; i < g.ops.size(); ++i) {
                const Op& op = g.ops[i];
                if (jobs_[i]) {
                    if (!jobs_[i]->converts_serially() || thread == 0)
                        jobs_[i]->run_phase(0, thread, n_threads);
                    barrier.arrive_and_wait();
                    jobs_[i]->run_phase(1, thread, n_threads);
                } else if (!serial_[i] || thread == 0) {
                    run(op, g, thread, serial_[i] ? 1 : n_threads);
                }
                // Two ops in a row that only thread 0 runs need no barrier between them.
                const bool next_serial = i + 1 < g.ops.size() && serial_[i + 1];
                if (!(serial_[i] && next_serial)) barrier.arrive_and_wait();
                if (thread == 0 && options_.trace) {
                    const auto now = std::chrono::steady_clock::now();
                    options_.trace(op,
                                   std::chrono::duration<double, std::micro>(now - last).count());
                    // The clock restarts after the trace itself (printing takes microseconds).
                    last = std::chrono::steady_clock::now();
                }
            }
        });
        logits_view_ = std::span<const float>(logits).first(logits_size);
    }

  private:
    int64_t buffer_width(Buf b) const {
        switch (b) {
            case Buf::Residual:
            case Buf::Normed:
            case Buf::Projected:
                return hp_.n_embd;
            case Buf::Q:
                return hp_.q_width();
            case Buf::K:
                return hp_.kv_width();
            case Buf::V:
                return hp_.v_width();
            case Buf::AttnOut:
                return hp_.attn_out_width();
            case Buf::FfnGate:
            case Buf::FfnUp:
                return hp_.n_ff;
            default:
                return 0;  // the logits grow on demand
        }
    }

    float* buf(Buf b) { return buffers_[static_cast<int>(b)].data(); }

    // Everything that could fail is checked before the threads start: an exception thrown by one
    // thread inside the run would leave the others waiting at a barrier.
    void validate(const Graph& g) const {
        if (g.n_tokens > options_.n_batch) {
            throw UsageError(concat("a batch of ", g.n_tokens, " tokens exceeds the batch size ",
                                    options_.n_batch));
        }
        for (int32_t pos : g.positions) {
            if (pos < 0 || pos >= kv_.n_ctx()) {
                throw UsageError(concat("position ", pos, " is outside the context of ",
                                        kv_.n_ctx(), " tokens"));
            }
        }
        for (int32_t id : g.tokens) {
            if (id < 0 || id >= hp_.n_vocab) {
                throw UsageError(concat("token id ", id, " is out of range: the model has ",
                                        hp_.n_vocab, " tokens"));
            }
        }
        for (int32_t row : g.output_rows) {
            if (row < 0 || row >= g.n_tokens)
                throw UsageError(concat("output row ", row, " is not in the batch"));
        }
    }

    // Creates the matmul jobs (validating them), binds them to one scratch region (they run one
    // after another) and decides which ops thread 0 runs alone.
    void plan(const Graph& g) {
        jobs_.assign(g.ops.size(), std::nullopt);
        serial_.assign(g.ops.size(), false);
        std::size_t scratch = 0;
        for (std::size_t i = 0; i < g.ops.size(); ++i) {
            const Op& op = g.ops[i];
            if (op.type == OpType::MatMul) {
                const Weight& w = *op.weight;
                jobs_[i].emplace(WeightMatrix{w.type(), w.n_cols(), w.n_rows(), w.data()},
                                 buf(op.src), op.rows, buf(op.dst), pool_.size());
                scratch = std::max(scratch, jobs_[i]->scratch_bytes());
            } else {
                serial_[i] = is_serial(op);
            }
        }
        std::byte* base = scratch_.reserve(scratch);
        const MatmulJob* previous = nullptr;
        for (auto& job : jobs_) {
            if (!job) {
                previous = nullptr;
                continue;
            }
            job->bind(base);
            if (previous != nullptr && job->can_share_activations(*previous))
                job->share_activations_of(*previous);
            previous = &*job;
        }
    }

    bool is_serial(const Op& op) const {
        if (pool_.size() == 1) return true;
        switch (op.type) {
            case OpType::Attention:
                return op.rows * hp_.n_head_kv == 1;
            case OpType::SelectRows:
            case OpType::GetRows:
            case OpType::AddBias:
                return true;
            default:
                return op.rows * op.width < kSerialElements;
        }
    }

    void run(const Op& op, const Graph& g, int thread, int n_threads) {
        switch (op.type) {
            case OpType::GetRows:
                return get_rows(op, g);
            case OpType::RmsNorm:
                return rms_norm(op, thread, n_threads);
            case OpType::AddBias:
                return add_bias(op);
            case OpType::HeadRmsNorm:
                return head_rms_norm(op, thread, n_threads);
            case OpType::Rope:
                return rope(op, g, thread, n_threads);
            case OpType::StoreKv:
                return store_kv(op, g, thread, n_threads);
            case OpType::Attention:
                return attention(op, g, thread, n_threads);
            case OpType::SwiGlu:
                return swiglu(op, thread, n_threads);
            case OpType::Add:
                return add(op, thread, n_threads);
            case OpType::SelectRows:
                return select_rows(op, g);
            case OpType::MatMul:
                return;  // a MatmulJob
        }
    }

    void get_rows(const Op& op, const Graph& g) {
        const Weight& w = *op.weight;
        minfer::get_rows(WeightMatrix{w.type(), w.n_cols(), w.n_rows(), w.data()},
                         std::span(g.tokens).first(static_cast<std::size_t>(op.rows)), buf(op.dst));
    }

    void rms_norm(const Op& op, int thread, int n_threads) {
        const float* src = buf(op.src);
        float* dst = buf(op.dst);
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t r = begin; r < end; ++r) {
            minfer::rms_norm(src + r * op.width, op.weight->f32(), dst + r * op.width, op.width,
                             hp_.rms_eps);
        }
    }

    void head_rms_norm(const Op& op, int thread, int n_threads) {
        float* x = buf(op.dst);
        const auto [begin, end] = share(op.rows * (op.width / op.head_dim), thread, n_threads);
        for (int64_t h = begin; h < end; ++h) {
            minfer::rms_norm(x + h * op.head_dim, op.weight->f32(), x + h * op.head_dim,
                             op.head_dim, hp_.rms_eps);
        }
    }

    void add_bias(const Op& op) {
        float* x = buf(op.dst);
        for (int64_t r = 0; r < op.rows; ++r)
            minfer::add(x + r * op.width, op.weight->f32(), x + r * op.width, op.width);
    }

    void rope(const Op& op, const Graph& g, int thread, int n_threads) {
        const auto [begin, end] = share(op.rows, thread, n_threads);
        if (begin >= end) return;
        minfer::rope(buf(op.dst) + begin * op.width, end - begin, op.width / op.head_dim,
                     std::span(g.positions).subspan(static_cast<std::size_t>(begin)), rope_);
    }

    void store_kv(const Op& op, const Graph& g, int thread, int n_threads) {
        const float* k = buf(Buf::K);
        const float* v = buf(Buf::V);
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t t = begin; t < end; ++t) {
            kv_.store(op.layer, g.positions[static_cast<std::size_t>(t)], k + t * hp_.kv_width(),
                      v + t * hp_.v_width());
        }
    }

    // One task per (token, K/V head): the query heads of a group share every K and V row. Later
    // tokens attend to more positions, so threads take tasks round robin.
    void attention(const Op& op, const Graph& g, int thread, int n_threads) {
        const AttentionShape shape{hp_.n_head, hp_.n_head_kv, hp_.head_dim_k, hp_.head_dim_v};
        AttentionWorkspace& ws = attention_[static_cast<std::size_t>(thread)];
        const int64_t tasks = op.rows * hp_.n_head_kv;
        for (int64_t task = thread; task < tasks; task += n_threads) {
            const int64_t t = task / hp_.n_head_kv;
            attend_kv_group(shape, kv_, op.layer, task % hp_.n_head_kv,
                            g.positions[static_cast<std::size_t>(t)],
                            buf(Buf::Q) + t * hp_.q_width(), buf(op.dst) + t * hp_.attn_out_width(),
                            ws);
        }
    }

    void swiglu(const Op& op, int thread, int n_threads) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src);
        const auto [begin, end] = share(op.rows * op.width, thread, n_threads);
        minfer::swiglu(gate + begin, up + begin, gate + begin, end - begin);
    }

    void add(const Op& op, int thread, int n_threads) {
        float* x = buf(op.dst);
        const float* y = buf(op.src);
        const auto [begin, end] = share(op.rows * op.width, thread, n_threads);
        minfer::add(x + begin, y + begin, x + begin, end - begin);
    }

    void select_rows(const Op& op, const Graph& g) {
        const float* src = buf(op.src);
        float* dst = buf(op.dst);
        for (int64_t i = 0; i < op.rows; ++i) {
            const int64_t row = g.output_rows[static_cast<std::size_t>(i)];
            std::memcpy(dst + i * op.width, src + row * op.width,
                        static_cast<std::size_t>(op.width) * sizeof(float));
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
    std::vector<std::optional<MatmulJob>> jobs_;  // per op of the graph being executed
    std::vector<bool> serial_;                    // per op: thread 0 runs it alone
    std::span<const float> logits_view_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options) {
    return std::make_unique<CpuBackend>(model, options);
}

}  // namespace minfer
