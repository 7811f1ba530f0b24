// The CPU backend: executes a whole Graph in one ThreadPool::run. Every thread walks the op list;
// each op splits its rows (or heads, or matrix rows) across the threads, and a barrier separates
// ops. Small ops run on thread 0 alone, and consecutive such ops need no barrier, so a decode
// step costs one wake-up of the pool instead of one per op. Matmuls that read the same input (Q,
// K, V; gate, up) convert it once. Activation buffers are allocated as the graphs declare them
// and kept (grown, never shrunk) for the next graph.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <unordered_set>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/cpu_moe.h"
#include "backend/cpu/kv_pool.h"
#include "backend/cpu/packed_weights.h"
#include "backend/host_buffers.h"
#include "core/error.h"
#include "core/mapped_file.h"
#include "core/memory_limits.h"
#include "core/spin_barrier.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"

namespace minfer {
namespace {

// Below this many values an op runs on thread 0 alone: sharing it costs more than the work.
constexpr int64_t kSerialElements = 1 << 14;

// [begin, end) of `count` items for thread i of n.
std::pair<int64_t, int64_t> share(int64_t count, int i, int n) {
    return {count * i / n, count * (i + 1) / n};
}

// Calls f(offset, count) for this thread's share of a [rows][width] buffer, in pieces that start
// at a multiple of 64 values of a row and end at one or at the row's end. SIMD element-wise ops
// compute whole vectors and then a scalar tail, whose results may differ in the last bit: cut this
// way, every value meets the same code whatever the number of rows and threads (batch invariance).
template <class F>
void for_row_pieces(int64_t rows, int64_t width, int thread, int n_threads, F&& f) {
    constexpr int64_t kPiece = 64;
    const int64_t per_row = (width + kPiece - 1) / kPiece;
    const auto [begin, end] = share(rows * per_row, thread, n_threads);
    for (int64_t u = begin; u < end;) {
        const int64_t row = u / per_row;
        const int64_t last = std::min(end, (row + 1) * per_row);
        const int64_t from = (u - row * per_row) * kPiece;
        const int64_t to = std::min(width, (last - row * per_row) * kPiece);
        f(row * width + from, to - from);
        u = last;
    }
}

WeightMatrix matrix_of(const Weight& w) {
    return WeightMatrix{w.type, w.n_cols(), w.n_rows(), w.data};
}

class CpuBackend final : public Backend {
  public:
    CpuBackend(const BackendOptions& options, ThreadPool& pool)
        : options_(options), kv_(options.kv), pool_(pool) {
        if (options.n_vocab < 1) throw UsageError("the CPU backend needs the vocabulary size");
        attention_.resize(static_cast<std::size_t>(pool_.size()));
    }

    std::string_view name() const override { return "cpu"; }
    std::span<const float> logits() const override { return logits_view_; }
    std::span<const float> activation_values(BufferId id, std::size_t count) const override {
        return buffers_.f32_values(id, count);
    }
    std::size_t kv_cache_bytes() const override { return kv_.bytes(); }
    uint64_t weight_bytes_read() const override {
        return static_weight_bytes_ + moe_workspace_.expert_bytes;
    }
    std::size_t weight_copy_bytes() const override { return packed_.bytes(); }

    void prepare(const Graph& g) override { offer_weights(g); }

    // Packs the weights not offered before; true if that made new copies (the planned jobs then
    // point at the mapped file).
    bool offer_weights(const Graph& g) {
        std::vector<WeightMatrix> matrices;
        for (const Op& op : g.ops) {
            // A table get_rows reads (the token embedding) is read a row at a time, at random:
            // have the file read ahead once, rather than wait for the disk at each row's first use.
            if (op.type == OpType::GetRows && op.weight != nullptr && *op.weight &&
                std::find(read_ahead_.begin(), read_ahead_.end(), op.weight->data.data()) ==
                    read_ahead_.end()) {
                read_ahead(op.weight->data);
                read_ahead_.push_back(op.weight->data.data());
            }
            if (!options_.repack_weights) continue;
            // Each weight is offered once (packed then, or never: PackedWeights refuses for
            // good); the graph of every step names them all again.
            if ((op.type != OpType::MatMul && op.type != OpType::MoeMatMul) ||
                !offered_.insert(op.weight->data.data()).second) {
                continue;
            }
            if (op.type == OpType::MatMul) matrices.push_back(matrix_of(*op.weight));
            // Experts: every 2-D slice of the 3-D tensor, each its own copy (a token reads k).
            if (op.type == OpType::MoeMatMul) {
                for (int64_t e = 0; e < op.weight->ne[2]; ++e)
                    matrices.push_back(matrix_of(op.weight->matrix(e)));
            }
        }
        if (matrices.empty()) return false;
        packed_.prepare(matrices, pool_);
        return true;
    }
    std::size_t scratch_bytes() const override {
        std::size_t n = scratch_.capacity() + buffers_.bytes();
        n += moe_workspace_.scratch.capacity() +
             (moe_workspace_.x_sorted.capacity() + moe_workspace_.y_sorted.capacity()) *
                 sizeof(float);
        return n;
    }
    void copy_kv_block(int32_t from, int32_t to, int64_t n_positions) override {
        const int64_t n_blocks = kv_.spec().n_blocks;
        if (from < 0 || from >= n_blocks || to < 0 || to >= n_blocks || n_positions < 0 ||
            n_positions > kv_.spec().block_size) {
            throw UsageError(concat("cannot copy cache block ", from, " to ", to));
        }
        kv_.copy_block(from, to, n_positions);
    }

    void execute(const Graph& g) override {
        // Everything that could fail is checked before the threads start: an exception thrown by
        // one thread inside the run would leave the others waiting at a barrier.
        validate_graph_for(g, options_);
        const bool new_copies = offer_weights(g);  // a set lookup per matmul once all are offered
        const bool moved = allocate(g);
        buffers_.write_carried(g);
        // A decode step's graph is the previous one's op for op: its jobs are made once (80 us
        // a step on Qwen2 0.5B, 169 matmuls) and rearmed after that.
        if (new_copies || moved || !same_plan(g)) {
            plan(g);
        } else {
            for (auto& job : jobs_) {
                if (job) job->rearm();
            }
        }
        SpinBarrier barrier(pool_.size());
        auto last = std::chrono::steady_clock::now();
        pool_.run([&](int thread, int n_threads) {
            for (std::size_t i = 0; i < g.ops.size(); ++i) {
                const Op& op = g.ops[i];
                if (jobs_[i]) {
                    // A job sharing the previous one's activations (K and V after Q, up after
                    // gate) has nothing to convert: it starts right after that job's products.
                    if (!jobs_[i]->shares_activations()) {
                        if (!jobs_[i]->converts_serially() || thread == 0)
                            jobs_[i]->run_phase(0, thread, n_threads);
                        barrier.arrive_and_wait();
                    }
                    jobs_[i]->run_phase(1, thread, n_threads);
                } else if (moe_[i]) {
                    moe_[i]->run(thread, n_threads, barrier);
                } else if (!serial_[i] || thread == 0) {
                    run(op, g, thread, serial_[i] ? 1 : n_threads);
                }
                // Two ops in a row that only thread 0 runs need no barrier between them (a
                // serial op and a matmul whose conversion only thread 0 runs: the others wait at
                // the conversion's barrier), nor two matmuls on the same input (neither reads
                // what the other writes).
                const MatmulJob* next_job =
                    i + 1 < g.ops.size() && jobs_[i + 1] ? &*jobs_[i + 1] : nullptr;
                const bool next_serial =
                    i + 1 < g.ops.size() &&
                    (serial_[i + 1] || (next_job != nullptr && !next_job->shares_activations() &&
                                        next_job->converts_serially()));
                const bool next_shares = next_job != nullptr && next_job->shares_activations() &&
                                         g.ops[i + 1].dst != op.src0 && g.ops[i + 1].dst != op.dst;
                if (!(serial_[i] && next_serial) && !next_shares) barrier.arrive_and_wait();
                if (thread == 0 && options_.trace) {
                    const auto now = std::chrono::steady_clock::now();
                    options_.trace(op,
                                   std::chrono::duration<double, std::micro>(now - last).count());
                    // The clock restarts after the trace itself (printing takes microseconds).
                    last = std::chrono::steady_clock::now();
                }
            }
        });
        logits_view_ = {};
        if (g.logits != kNoBuffer) {
            logits_view_ = std::span<const float>(
                buffers_.f32(g.logits),
                static_cast<std::size_t>(g.in.n_outputs() * options_.n_vocab));
        }
    }

  private:
    float* buf(BufferId b) { return buffers_.f32(b); }

    // Grows the buffers the graph declares; true if one moved.
    bool allocate(const Graph& g) {
        // The batch size is the user's (-b): 65536 tokens of a 152k vocabulary's logits alone are
        // 40 GiB. What the buffers grow by (a grown vector is allocated anew before the old one
        // is freed) is checked first, so that too much ends in one line with the size instead of
        // std::bad_alloc or the OOM killer. Small growth is not worth reading /proc for.
        constexpr uint64_t kCheckedGrowth = uint64_t{16} << 20;
        const uint64_t growth = buffers_.growth(g);
        if (growth >= kCheckedGrowth) {
            require_memory(growth,
                           concat("a batch of ", g.in.n_tokens(), " tokens (", g.in.n_outputs(),
                                  " with logits)"),
                           "; lower --batch (-b)");
        }
        buffers_.grow(g);
        return growth > 0;
    }

    // What plan() reads of an op: the same keys for every op (with the buffers and the weight
    // copies unchanged) make the same jobs.
    struct PlanKey {
        OpType type;
        const std::byte* weight;
        int64_t rows, width, n_head_kv;
        BufferId src0, src1, dst;
        bool operator==(const PlanKey&) const = default;
    };
    static PlanKey plan_key(const Op& op) {
        const std::byte* weight = op.weight != nullptr ? op.weight->data.data() : nullptr;
        return {op.type, weight, op.rows, op.width, op.attn.n_head_kv, op.src0, op.src1, op.dst};
    }

    // True if the jobs planned last fit g as they are. Expert matmuls are always planned anew
    // (they count the experts' bytes as they bind).
    bool same_plan(const Graph& g) const {
        if (g.ops.size() != planned_.size()) return false;
        for (std::size_t i = 0; i < g.ops.size(); ++i) {
            if (g.ops[i].type == OpType::MoeMatMul || !(plan_key(g.ops[i]) == planned_[i]))
                return false;
        }
        return true;
    }

    // Creates the matmul jobs (validating them), binds them to one scratch region (they run one
    // after another), plans the expert matmuls and decides which ops thread 0 runs alone.
    void plan(const Graph& g) {
        planned_.clear();
        for (const Op& op : g.ops) planned_.push_back(plan_key(op));
        jobs_.clear();  // (jobs are not copyable: assign would copy)
        jobs_.resize(g.ops.size());
        moe_.assign(g.ops.size(), std::nullopt);
        serial_.assign(g.ops.size(), false);
        static_weight_bytes_ = weight_bytes_without_experts(g);
        moe_workspace_.expert_bytes = 0;
        std::size_t scratch = 0;
        const MatmulMode mode =
            options_.batch_invariant ? MatmulMode::kBatchInvariant : MatmulMode::kGemvForOneToken;
        for (std::size_t i = 0; i < g.ops.size(); ++i) {
            const Op& op = g.ops[i];
            if (op.type == OpType::MatMul) {
                jobs_[i].emplace(packed_.attach(matrix_of(*op.weight)), buf(op.src0), op.rows,
                                 buf(op.dst), pool_.size(), mode);
                scratch = std::max(scratch, jobs_[i]->scratch_bytes());
            } else if (op.type == OpType::MoeMatMul) {
                moe_[i].emplace(op, buf(op.src0), buffers_.i32(op.src1), buf(op.dst), pool_.size(),
                                mode, moe_workspace_, packed_);
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

    // What the graph's ops read of the weights, but the experts (counted as they are bound).
    static uint64_t weight_bytes_without_experts(const Graph& g) {
        uint64_t n = 0;
        for (const Op& op : g.ops) {
            if (op.weight == nullptr || !*op.weight || op.type == OpType::MoeMatMul) continue;
            if (op.type == OpType::GetRows) {
                n +=
                    row_size(op.weight->type, op.weight->n_cols()) * static_cast<uint64_t>(op.rows);
            } else {
                n += op.weight->data.size();
            }
        }
        return n;
    }

    bool is_serial(const Op& op) const {
        if (pool_.size() == 1) return true;
        switch (op.type) {
            case OpType::Attention:
                return op.rows * op.attn.n_head_kv == 1;
            case OpType::SelectRows:
            case OpType::GetRows:
            case OpType::AddBias:
            case OpType::MoeRoute:
            case OpType::MoeWeights:
                return true;
            default:
                return op.rows * op.width < kSerialElements;
        }
    }

    void run(const Op& op, const Graph& g, int thread, int n_threads) {
        switch (op.type) {
            case OpType::GetRows:
                return minfer::get_rows(
                    matrix_of(*op.weight),
                    std::span(g.in.tokens).first(static_cast<std::size_t>(op.rows)), buf(op.dst));
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
            case OpType::GeGlu:
                return geglu(op, thread, n_threads);
            case OpType::Scale:
                return scale(op, thread, n_threads);
            case OpType::SoftCap:
                return softcap(op, thread, n_threads);
            case OpType::MoeRoute:
                return moe_route(op, thread, n_threads);
            case OpType::MoeWeights:
                return moe_weights(op, thread, n_threads);
            case OpType::MoeCombine:
                return moe_combine(op, thread, n_threads);
            case OpType::MatMul:
            case OpType::MoeMatMul:
                return;  // a MatmulJob, a MoeMatmul
        }
    }

    void rms_norm(const Op& op, int thread, int n_threads) {
        const float* src = buf(op.src0);
        float* dst = buf(op.dst);
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t r = begin; r < end; ++r) {
            minfer::rms_norm(src + r * op.width, op.weight->f32(), dst + r * op.width, op.width,
                             op.eps);
        }
    }

    void head_rms_norm(const Op& op, int thread, int n_threads) {
        float* x = buf(op.dst);
        const auto [begin, end] = share(op.rows * (op.width / op.head_dim), thread, n_threads);
        for (int64_t h = begin; h < end; ++h) {
            minfer::rms_norm(x + h * op.head_dim, op.weight->f32(), x + h * op.head_dim,
                             op.head_dim, op.eps);
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
        RopeConfig config;
        config.style = op.rope.style;
        config.head_dim = op.head_dim;
        config.n_dims = op.rope.n_dims;
        config.freq_base = op.rope.freq_base;
        config.freq_scale = op.rope.freq_scale;
        config.freq_factors = op.weight != nullptr && *op.weight ? op.weight->f32() : nullptr;
        config.attn_factor = op.rope.attn_factor;
        minfer::rope(buf(op.dst) + begin * op.width, end - begin, op.width / op.head_dim,
                     std::span(g.in.positions).subspan(static_cast<std::size_t>(begin)), config);
    }

    void store_kv(const Op& op, const Graph& g, int thread, int n_threads) {
        const float* k = buf(op.src0);
        const float* v = buf(op.src1);
        const int64_t k_width = op.attn.n_head_kv * op.attn.head_dim_k;
        const int64_t v_width = op.attn.n_head_kv * op.attn.head_dim_v;
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t t = begin; t < end; ++t) {
            kv_.store(op.kv_layer, g.in.kv_slots[static_cast<std::size_t>(t)], k + t * k_width,
                      v + t * v_width);
        }
    }

    // One task per (token, K/V head): the query heads of a group share every K and V row. Later
    // tokens attend to more positions, so threads take tasks round robin.
    void attention(const Op& op, const Graph& g, int thread, int n_threads) {
        const AttentionParams& a = op.attn;
        AttentionWorkspace& ws = attention_[static_cast<std::size_t>(thread)];
        const int64_t tasks = op.rows * a.n_head_kv;
        const float* q = buf(op.src0);
        float* out = buf(op.dst);
        for (int64_t task = thread; task < tasks; task += n_threads) {
            const auto t = static_cast<std::size_t>(task / a.n_head_kv);
            attend_kv_group(a, kv_, op.kv_layer, task % a.n_head_kv, g.in.positions[t],
                            g.in.block_table(g.in.sequence[t]),
                            q + static_cast<int64_t>(t) * a.n_head * a.head_dim_k,
                            out + static_cast<int64_t>(t) * op.width, ws);
        }
    }

    void swiglu(const Op& op, int thread, int n_threads) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src0);
        for_row_pieces(op.rows, op.width, thread, n_threads, [&](int64_t at, int64_t n) {
            minfer::swiglu(gate + at, up + at, gate + at, n);
        });
    }

    // gelu(gate) rounded through ggml's f16 table, then times up, as ggml's two ops compute it.
    void geglu(const Op& op, int thread, int n_threads) {
        float* gate = buf(op.dst);
        const float* up = buf(op.src0);
        for_row_pieces(op.rows, op.width, thread, n_threads, [&](int64_t at, int64_t n) {
            minfer::gelu(gate + at, gate + at, n);
            minfer::mul(gate + at, up + at, gate + at, n);
        });
    }

    void scale(const Op& op, int thread, int n_threads) {
        float* x = buf(op.dst);
        const auto [begin, end] = share(op.rows * op.width, thread, n_threads);
        for (int64_t i = begin; i < end; ++i) x[i] *= op.factor;
    }

    void softcap(const Op& op, int thread, int n_threads) {
        float* x = buf(op.dst);
        const auto [begin, end] = share(op.rows * op.width, thread, n_threads);
        soft_cap_row(x + begin, end - begin, op.factor);
    }

    void moe_route(const Op& op, int thread, int n_threads) {
        const float* logits = buf(op.src0);
        int32_t* ids = buffers_.i32(op.dst);
        const int64_t n_expert = op.moe.n_expert, k = op.moe.n_used;
        std::vector<float> probs(static_cast<std::size_t>(n_expert));
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t t = begin; t < end; ++t)
            moe_route_row(logits + t * n_expert, n_expert, k, probs.data(), ids + t * k);
    }

    void moe_weights(const Op& op, int thread, int n_threads) {
        const float* logits = buf(op.src0);
        const int32_t* ids = buffers_.i32(op.src1);
        float* weights = buf(op.dst);
        const int64_t n_expert = op.moe.n_expert, k = op.moe.n_used;
        std::vector<float> probs(static_cast<std::size_t>(n_expert));
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t t = begin; t < end; ++t) {
            moe_weights_row(logits + t * n_expert, n_expert, ids + t * k, k, probs.data(),
                            weights + t * k);
        }
    }

    void moe_combine(const Op& op, int thread, int n_threads) {
        const float* experts = buf(op.src0);
        const float* weights = buf(op.src1);
        float* out = buf(op.dst);
        const int64_t k = op.moe.n_used;
        const auto [begin, end] = share(op.rows, thread, n_threads);
        for (int64_t t = begin; t < end; ++t)
            moe_combine_row(experts + t * k * op.width, weights + t * k, k, op.width,
                            out + t * op.width);
    }

    void add(const Op& op, int thread, int n_threads) {
        float* x = buf(op.dst);
        const float* y = buf(op.src0);
        const auto [begin, end] = share(op.rows * op.width, thread, n_threads);
        minfer::add(x + begin, y + begin, x + begin, end - begin);
    }

    void select_rows(const Op& op, const Graph& g) {
        const float* src = buf(op.src0);
        float* dst = buf(op.dst);
        for (int64_t i = 0; i < op.rows; ++i) {
            const int64_t row = g.in.output_rows[static_cast<std::size_t>(i)];
            std::memcpy(dst + i * op.width, src + row * op.width,
                        static_cast<std::size_t>(op.width) * sizeof(float));
        }
    }

    BackendOptions options_;
    CpuKvPool kv_;
    ThreadPool& pool_;
    MatmulScratch scratch_;
    PackedWeights packed_;  // interleaved copies of the matmul weights (empty with --no-repack)
    std::vector<const std::byte*> read_ahead_;      // the get_rows tables already read ahead
    std::unordered_set<const std::byte*> offered_;  // weights offered to packed_ (their data)
    HostBuffers buffers_;                           // by BufferId of the graphs executed
    std::vector<AttentionWorkspace> attention_;     // per thread
    std::vector<std::optional<MatmulJob>> jobs_;    // per op of the graph being executed
    std::vector<PlanKey> planned_;                  // per op of the graph jobs_ were made for
    std::vector<std::optional<MoeMatmul>> moe_;     // per op: the expert matmuls
    MoeWorkspace moe_workspace_;
    uint64_t static_weight_bytes_ = 0;  // weight_bytes_read() less the experts
    std::vector<bool> serial_;          // per op: thread 0 runs it alone
    std::span<const float> logits_view_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, ThreadPool& pool) {
    return std::make_unique<CpuBackend>(options, pool);
}

}  // namespace minfer
