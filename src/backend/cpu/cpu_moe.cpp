#include "backend/cpu/cpu_moe.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/packed_weights.h"
#include "kernels/attention.h"

namespace minfer {
namespace {

constexpr std::size_t align64(std::size_t n) {
    return (n + 63) & ~std::size_t{63};
}

// [begin, end) of `count` items for thread i of n.
std::pair<int64_t, int64_t> share(int64_t count, int i, int n) {
    return {count * i / n, count * (i + 1) / n};
}

}  // namespace

void moe_route_row(const float* logits, int64_t n_expert, int64_t k, float* probs, int32_t* ids) {
    std::copy_n(logits, n_expert, probs);
    softmax_like_ggml(probs, n_expert);
    // The k largest probabilities, largest first; the lower id wins a tie. k is small (2-8), the
    // experts at most a few hundred: k passes over them cost less than sorting.
    for (int64_t j = 0; j < k; ++j) {
        int64_t best = -1;
        for (int64_t e = 0; e < n_expert; ++e) {
            bool taken = false;
            for (int64_t i = 0; i < j && !taken; ++i) taken = ids[i] == e;
            if (!taken && (best < 0 || probs[e] > probs[best])) best = e;
        }
        ids[j] = static_cast<int32_t>(best);
    }
}

void moe_weights_row(const float* logits, int64_t n_expert, const int32_t* ids, int64_t k,
                     float* probs, float* weights) {
    std::copy_n(logits, n_expert, probs);
    softmax_like_ggml(probs, n_expert);
    double sum = 0.0;
    for (int64_t j = 0; j < k; ++j) {
        weights[j] = probs[ids[j]];
        sum += weights[j];
    }
    // ggml sums the weights in double, stores the sum as f32 and divides by it.
    const auto total = static_cast<float>(sum);
    for (int64_t j = 0; j < k; ++j) weights[j] /= total;
}

void moe_combine_row(const float* experts, const float* weights, int64_t k, int64_t width,
                     float* out) {
    for (int64_t i = 0; i < width; ++i) out[i] = experts[i] * weights[0];
    for (int64_t j = 1; j < k; ++j) {
        const float* e = experts + j * width;
        for (int64_t i = 0; i < width; ++i) out[i] += e[i] * weights[j];
    }
}

MoeMatmul::MoeMatmul(const Op& op, const float* x, const int32_t* experts, float* y, int n_threads,
                     MatmulMode mode, MoeWorkspace& ws, const PackedWeights& packed)
    : weight_(*op.weight),
      moe_(op.moe),
      x_(x),
      experts_(experts),
      y_(y),
      rows_(op.rows),
      n_in_(op.weight->ne[0]),
      n_out_(op.weight->ne[1]),
      n_threads_(n_threads),
      mode_(mode),
      ws_(&ws),
      packed_(&packed) {
    // Every expert has the first one's type and shape: if it suits a MatmulJob, so do all, and
    // the jobs prepare() creates during the run cannot throw.
    (void)MatmulJob(expert(0), x, 1, y, n_threads, mode);
    const auto slots = static_cast<std::size_t>(rows_ * moe_.n_used);
    if (ws.sorted.size() < slots) ws.sorted.resize(slots);
    if (ws.x_sorted.size() < slots * static_cast<std::size_t>(n_in_))
        ws.x_sorted.resize(slots * static_cast<std::size_t>(n_in_));
    if (ws.y_sorted.size() < slots * static_cast<std::size_t>(n_out_))
        ws.y_sorted.resize(slots * static_cast<std::size_t>(n_out_));
    ws.groups.reserve(static_cast<std::size_t>(moe_.n_expert));
    ws.jobs.reserve(static_cast<std::size_t>(moe_.n_expert));
}

WeightMatrix MoeMatmul::expert(int64_t e) const {
    const Weight m = weight_.matrix(e);
    return packed_->attach(WeightMatrix{m.type, m.n_cols(), m.n_rows(), m.data});
}

void MoeMatmul::prepare() {
    MoeWorkspace& ws = *ws_;
    const int64_t k = moe_.n_used;
    // Counting sort of the (token, slot) rows by expert, stable: within an expert, rows keep
    // their batch order.
    std::vector<int64_t> count(static_cast<std::size_t>(moe_.n_expert) + 1, 0);
    for (int64_t t = 0; t < rows_; ++t)
        for (int64_t j = 0; j < k; ++j) ++count[static_cast<std::size_t>(experts_[t * k + j]) + 1];
    for (std::size_t e = 1; e < count.size(); ++e) count[e] += count[e - 1];
    ws.groups.clear();
    for (int64_t e = 0; e < moe_.n_expert; ++e) {
        const int64_t first = count[static_cast<std::size_t>(e)];
        const int64_t n = count[static_cast<std::size_t>(e) + 1] - first;
        if (n > 0) ws.groups.push_back(MoeWorkspace::Group{e, first, n});
    }
    for (int64_t t = 0; t < rows_; ++t) {
        for (int64_t j = 0; j < k; ++j) {
            auto& next = count[static_cast<std::size_t>(experts_[t * k + j])];
            ws.sorted[static_cast<std::size_t>(next++)] = t * k + j;
        }
    }
    // One job per used expert, each with its own scratch region (their conversions run at once).
    // One token: each expert has its one row, read and written in place (unless a routing named
    // an expert twice, or the input overlaps the output, which the copies keep apart).
    const float* x_end = x_ + (moe_.per_slot_input ? k : 1) * n_in_;
    const float* y_end = y_ + k * n_out_;
    in_place_ =
        rows_ == 1 && static_cast<int64_t>(ws.groups.size()) == k && (x_end <= y_ || y_end <= x_);
    ws.jobs.clear();
    std::size_t scratch = 0;
    for (const auto& g : ws.groups) {
        const WeightMatrix w = expert(g.expert);
        ws.expert_bytes += w.data.size();
        if (in_place_) {
            const int64_t slot = ws.sorted[static_cast<std::size_t>(g.first)];
            ws.jobs.emplace_back(w, moe_.per_slot_input ? x_ + slot * n_in_ : x_, 1,
                                 y_ + slot * n_out_, n_threads_, mode_);
        } else {
            ws.jobs.emplace_back(w, ws.x_sorted.data() + g.first * n_in_, g.count,
                                 ws.y_sorted.data() + g.first * n_out_, n_threads_, mode_);
        }
        scratch += align64(ws.jobs.back().scratch_bytes());
    }
    std::byte* base = ws.scratch.reserve(scratch);
    for (MatmulJob& job : ws.jobs) {
        job.bind(base);
        base += align64(job.scratch_bytes());
        // The token's one input, shared by every expert: converted once.
        if (in_place_ && &job != &ws.jobs.front() && job.can_share_activations(ws.jobs.front()))
            job.share_activations_of(ws.jobs.front());
    }
    if (in_place_) {  // the conversions (a few microseconds) here, saving two phases
        for (const MatmulJob& job : ws.jobs) job.run_phase(0, 0, 1);
    }
}

void MoeMatmul::run(int thread, int n, SpinBarrier& barrier) {
    if (thread == 0) prepare();
    barrier.arrive_and_wait();
    if (in_place_) {
        multiply(thread, n);
        return;
    }
    gather(thread, n);
    barrier.arrive_and_wait();
    convert(thread, n);
    barrier.arrive_and_wait();
    multiply(thread, n);
    barrier.arrive_and_wait();
    scatter(thread, n);
}

void MoeMatmul::gather(int thread, int n) {
    const MoeWorkspace& ws = *ws_;
    const auto [begin, end] = share(rows_ * moe_.n_used, thread, n);
    const auto bytes = static_cast<std::size_t>(n_in_) * sizeof(float);
    for (int64_t r = begin; r < end; ++r) {
        const int64_t row = ws.sorted[static_cast<std::size_t>(r)];
        // The token's input, or its slot's row when every slot has its own.
        const float* src = moe_.per_slot_input ? x_ + row * n_in_ : x_ + row / moe_.n_used * n_in_;
        std::memcpy(ws_->x_sorted.data() + r * n_in_, src, bytes);
    }
}

void MoeMatmul::convert(int thread, int n) {
    const auto& jobs = ws_->jobs;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
        if (jobs[j].converts_serially()) {
            // One-token jobs (decoding): each converted by one thread, spread round robin.
            if (static_cast<int>(j % static_cast<std::size_t>(n)) == thread)
                jobs[j].run_phase(0, 0, 1);
        } else {
            jobs[j].run_phase(0, thread, n);
        }
    }
}

void MoeMatmul::multiply(int thread, int n) {
    for (const MatmulJob& job : ws_->jobs) job.run_phase(1, thread, n);
}

void MoeMatmul::scatter(int thread, int n) {
    const MoeWorkspace& ws = *ws_;
    const auto [begin, end] = share(rows_ * moe_.n_used, thread, n);
    const auto bytes = static_cast<std::size_t>(n_out_) * sizeof(float);
    for (int64_t r = begin; r < end; ++r) {
        // Row token * k + slot of dst [rows][k][n_out] is at that index times n_out.
        const int64_t row = ws.sorted[static_cast<std::size_t>(r)];
        std::memcpy(y_ + row * n_out_, ws.y_sorted.data() + r * n_out_, bytes);
    }
}

}  // namespace minfer
