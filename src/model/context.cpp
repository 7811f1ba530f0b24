#include "model/context.h"

#include <sched.h>

#include <algorithm>
#include <numeric>
#include <thread>

#include "core/error.h"
#include "model/decoder_graph.h"

namespace minfer {

int default_thread_count() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

constexpr int64_t kDefaultMaxContext = 4096;
constexpr int kMaxThreads = 1024;

int64_t choose_context(const ContextOptions& o, const HParams& hp) {
    if (o.n_ctx < 0) throw UsageError(concat("context length must be positive, got ", o.n_ctx));
    return o.n_ctx == 0 ? std::min(kDefaultMaxContext, hp.n_ctx_train) : o.n_ctx;
}

}  // namespace

InferenceContext::InferenceContext(std::shared_ptr<const Model> model, const ContextOptions& options)
    : model_(std::move(model)),
      n_ctx_(choose_context(options, model_->hparams())),
      n_batch_(options.n_batch),
      n_threads_(options.n_threads == 0 ? default_thread_count() : options.n_threads) {
    if (n_batch_ < 1) throw UsageError(concat("batch size must be at least 1, got ", n_batch_));
    if (n_threads_ < 1 || n_threads_ > kMaxThreads) {
        throw UsageError(concat("thread count must be 1..", kMaxThreads, ", got ", options.n_threads));
    }
    // A micro-batch never holds more tokens than the context.
    n_batch_ = std::min(n_batch_, n_ctx_);
    BackendOptions b;
    b.n_ctx = n_ctx_;
    b.n_batch = n_batch_;
    b.n_threads = n_threads_;
    b.pin_threads = options.pin_threads;
    b.kv_type = options.kv_type;
    b.trace = options.trace;
    backend_ = make_cpu_backend(*model_, b);
}

Graph InferenceContext::graph_for(std::span<const int32_t> tokens, bool all_logits) const {
    const auto n = static_cast<int32_t>(std::min<int64_t>(static_cast<int64_t>(tokens.size()), n_batch_));
    std::vector<int32_t> rows;
    if (all_logits) {
        rows.resize(static_cast<std::size_t>(n));
        std::iota(rows.begin(), rows.end(), 0);
    } else if (n > 0) {
        rows.push_back(n - 1);
    }
    return build_decoder_graph(model_->arch(), model_->hparams(), model_->weights(), tokens.first(static_cast<std::size_t>(n)),
                               static_cast<int32_t>(n_past_), rows);
}

void InferenceContext::evaluate(std::span<const int32_t> tokens, bool all_logits, const LogitsSink& sink) {
    const auto n = static_cast<int64_t>(tokens.size());
    if (n_past_ + n > n_ctx_) {
        throw UsageError(concat(n, " tokens do not fit the context: ", n_past_, " of ", n_ctx_,
                                " positions are used (raise --ctx)"));
    }
    const int64_t n_vocab = model_->hparams().n_vocab;
    for (int64_t i = 0; i < n; ++i) {
        const int32_t id = tokens[static_cast<std::size_t>(i)];
        if (id < 0 || id >= n_vocab) {
            throw UsageError(concat("token id ", id, " is out of range: the model has ", n_vocab, " tokens"));
        }
    }
    for (int64_t start = 0; start < n; start += n_batch_) {
        const int64_t count = std::min(n_batch_, n - start);
        const bool last_chunk = start + count == n;
        std::vector<int32_t> rows;
        if (all_logits) {
            rows.resize(static_cast<std::size_t>(count));
            std::iota(rows.begin(), rows.end(), 0);
        } else if (last_chunk) {
            rows.push_back(static_cast<int32_t>(count - 1));
        }
        const Graph g = build_decoder_graph(model_->arch(), model_->hparams(), model_->weights(),
                                            tokens.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(count)),
                                            static_cast<int32_t>(n_past_), rows);
        backend_->execute(g);
        n_past_ += count;
        const auto logits = backend_->logits();
        for (std::size_t i = 0; i < rows.size(); ++i) {
            sink(start + rows[i], logits.subspan(i * static_cast<std::size_t>(n_vocab), static_cast<std::size_t>(n_vocab)));
        }
    }
}

std::vector<float> InferenceContext::evaluate_last(std::span<const int32_t> tokens) {
    std::vector<float> out;
    evaluate(tokens, false, [&](int64_t, std::span<const float> logits) { out.assign(logits.begin(), logits.end()); });
    return out;
}

void InferenceContext::truncate(int64_t n) {
    if (n < 0 || n > n_past_) throw UsageError(concat("cannot truncate the context to ", n, " of ", n_past_, " positions"));
    n_past_ = n;
}

}  // namespace minfer
