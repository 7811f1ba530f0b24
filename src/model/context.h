#pragma once
// An inference context: one sequence's KV cache on a backend, fed tokens in micro-batches.
// Scratch memory is allocated when the context is created, not per token.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "model/backend.h"
#include "model/graph.h"
#include "model/model.h"

namespace minfer {

struct ContextOptions {
    int64_t n_ctx = 0;  // positions the KV cache holds; 0 = min(4096, the model's context_length)
    int64_t n_batch = 512;  // micro-batch size for prompt processing
    // 0 = every CPU this process may use; more than that is clamped to it, with a warning.
    int n_threads = 0;
    // One thread per CPU, pinned: on some VMs (Firecracker) unpinned threads pile onto one vCPU.
    bool pin_threads = true;
    GgmlType kv_type = GgmlType::F16;
    std::function<void(const Op& op, double micros)> trace;  // per-op timing (MINFER_TRACE)
};

// The number of threads 0 stands for: the CPUs this process may run on.
int default_thread_count();

class InferenceContext {
  public:
    // Throws UsageError for bad options (n_ctx < 0, n_batch < 1, threads < 0).
    InferenceContext(std::shared_ptr<const Model> model, const ContextOptions& options);

    // Receives the logits of batch row `index` (index into the tokens passed to evaluate).
    using LogitsSink = std::function<void(int64_t index, std::span<const float> logits)>;

    // Runs `tokens` at positions n_past() .. n_past() + size - 1 and keeps them in the cache.
    // Logits of every token (all_logits) or only of the last go to `sink`. Throws UsageError if the
    // tokens do not fit the context or an id is out of the vocabulary.
    void evaluate(std::span<const int32_t> tokens, bool all_logits, const LogitsSink& sink);
    // Convenience: evaluates tokens and returns the last token's logits.
    std::vector<float> evaluate_last(std::span<const int32_t> tokens);

    int64_t n_past() const { return n_past_; }
    int64_t n_ctx() const { return n_ctx_; }
    int64_t n_batch() const { return n_batch_; }
    int n_threads() const { return n_threads_; }
    // Forgets positions n and above (n <= n_past()): the next tokens overwrite them.
    void truncate(int64_t n);
    void reset() { truncate(0); }

    // The graph evaluate() would run for one micro-batch (for --dump-graph).
    Graph graph_for(std::span<const int32_t> tokens, bool all_logits) const;

    const Model& model() const { return *model_; }
    const Backend& backend() const { return *backend_; }

  private:
    // The graph of one micro-batch at position n_past(); `last`: the prompt's last micro-batch.
    Graph micro_batch_graph(std::span<const int32_t> tokens, bool all_logits, bool last) const;

    std::shared_ptr<const Model> model_;
    int64_t n_ctx_;
    int64_t n_batch_;
    int n_threads_;
    std::unique_ptr<Backend> backend_;
    int64_t n_past_ = 0;
};

}  // namespace minfer
