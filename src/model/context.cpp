#include "model/context.h"

#include <algorithm>
#include <numeric>

#include "core/cpu_set.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_limits.h"
#include "model/kv_cache.h"
#include "model/decoder_graph.h"

namespace minfer {

int default_thread_count() {
    return usable_cpu_count();
}

namespace {

constexpr int64_t kDefaultMaxContext = 4096;

int64_t choose_context(const ContextOptions& o, const HParams& hp) {
    if (o.n_ctx < 0) throw UsageError(concat("context length must be positive, got ", o.n_ctx));
    const int64_t n_ctx = o.n_ctx == 0 ? std::min(kDefaultMaxContext, hp.n_ctx_train) : o.n_ctx;
    if (n_ctx > hp.n_ctx_train) {
        log_warning(concat("a context of ", n_ctx, " tokens exceeds the ", hp.n_ctx_train,
                           " the model was trained for; its answers degrade beyond that"));
    }
    // Refused before anything is allocated, with the sizes, rather than std::bad_alloc later.
    require_memory(KvCache::bytes_for(hp, n_ctx, o.kv_type),
                   concat("a KV cache of ", n_ctx, " tokens (", type_name(o.kv_type), ")"),
                   "; lower --ctx or use --cache-type q8_0");
    return n_ctx;
}

}  // namespace

InferenceContext::InferenceContext(std::shared_ptr<const Model> model,
                                   const ContextOptions& options)
    : model_(std::move(model)),
      n_ctx_(choose_context(options, model_->hparams())),
      n_batch_(options.n_batch),
      // More threads than CPUs would wait at every barrier for a thread without a CPU.
      n_threads_(clamp_thread_count(options.n_threads, "n_threads")) {
    if (n_batch_ < 1) throw UsageError(concat("batch size must be at least 1, got ", n_batch_));
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

Graph InferenceContext::micro_batch_graph(std::span<const int32_t> tokens, bool all_logits,
                                          bool last) const {
    // Logits of every row, or of the last row of the last micro-batch.
    const auto n = static_cast<int32_t>(tokens.size());
    std::vector<int32_t> rows;
    if (all_logits) {
        rows.resize(tokens.size());
        std::iota(rows.begin(), rows.end(), 0);
    } else if (last && n > 0) {
        rows.push_back(n - 1);
    }
    return build_decoder_graph(model_->arch(), model_->hparams(), model_->weights(), tokens,
                               static_cast<int32_t>(n_past_), rows);
}

Graph InferenceContext::graph_for(std::span<const int32_t> tokens, bool all_logits) const {
    const auto n = std::min<std::size_t>(tokens.size(), static_cast<std::size_t>(n_batch_));
    return micro_batch_graph(tokens.first(n), all_logits, true);
}

void InferenceContext::evaluate(std::span<const int32_t> tokens, bool all_logits,
                                const LogitsSink& sink) {
    const auto n = static_cast<int64_t>(tokens.size());
    if (n_past_ + n > n_ctx_) {
        throw LimitError(concat(n, " tokens do not fit the context: ", n_past_, " of ", n_ctx_,
                                " positions are used (raise --ctx)"));
    }
    // Checked before any micro-batch runs, so that a bad id leaves the cache as it was.
    const int64_t n_vocab = model_->hparams().n_vocab;
    for (const int32_t id : tokens) {
        if (id < 0 || id >= n_vocab) {
            throw UsageError(
                concat("token id ", id, " is out of range: the model has ", n_vocab, " tokens"));
        }
    }
    for (int64_t start = 0; start < n; start += n_batch_) {
        const int64_t count = std::min(n_batch_, n - start);
        const Graph g = micro_batch_graph(
            tokens.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(count)),
            all_logits, start + count == n);
        backend_->execute(g);
        n_past_ += count;
        const auto logits = backend_->logits();
        for (std::size_t i = 0; i < g.output_rows.size(); ++i) {
            sink(start + g.output_rows[i], logits.subspan(i * static_cast<std::size_t>(n_vocab),
                                                          static_cast<std::size_t>(n_vocab)));
        }
    }
}

std::vector<float> InferenceContext::evaluate_last(std::span<const int32_t> tokens) {
    std::vector<float> out;
    evaluate(tokens, false, [&](int64_t, std::span<const float> logits) {
        out.assign(logits.begin(), logits.end());
    });
    return out;
}

void InferenceContext::truncate(int64_t n) {
    if (n < 0 || n > n_past_)
        throw UsageError(
            concat("cannot truncate the context to ", n, " of ", n_past_, " positions"));
    n_past_ = n;
}

}  // namespace minfer
