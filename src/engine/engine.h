#pragma once
// The engine: one model, one backend, the process's shared thread pool, and the sequences being
// evaluated. step() builds one batch within the token budget (-b/--batch): one token for every
// decoding sequence first, then chunks of waiting prompts in arrival order; runs it as one
// forward pass; samples each sequence with its own sampler chain and seed; and reports what
// happened to each sequence (a token and its text, the end and why). Every command that runs a
// model goes through it: run, chat, score, bench, and the server.
//
// The KV cache is paged (engine/paged_kv_cache.h): sequences share prompt prefixes through the
// prefix cache, which is looked up whenever a sequence's prompt reaches a block boundary. When the
// pool runs out, the youngest sequence is preempted (its blocks freed, its tokens evaluated
// again later); a sequence that would not fit even alone ends with StopReason::CacheFull.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "engine/paged_kv_cache.h"
#include "engine/sequence_output.h"
#include "engine/stop_reason.h"
#include "grammar/compiled_grammar.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

class ThreadPool;

// The most positions a KV cache may hold (beyond any machine's memory for any model).
inline constexpr int64_t kMaxKvTokens = int64_t{1} << 30;

struct EngineOptions {
    int64_t n_ctx = 0;      // positions one sequence may hold; 0 = min(4096, the model's)
    int64_t n_batch = 512;  // the most tokens one forward pass evaluates
    // The most prompt tokens a step adds while other sequences decode (0: up to n_batch): the
    // knob between time to first token and the others' inter-token latency.
    int64_t prefill_chunk = 0;
    // Positions the KV pool holds for all sequences together; 0 = n_ctx (one sequence).
    int64_t kv_tokens = 0;
    int n_threads = 0;  // 0 = every usable CPU; more are clamped (core/cpu_set.h)
    // One thread per CPU, pinned: on some VMs (Firecracker) unpinned threads pile onto one vCPU.
    bool pin_threads = true;
    GgmlType kv_type = GgmlType::F16;
    bool batch_invariant = true;  // see BackendOptions
    bool repack_weights = true;   // see BackendOptions (--no-repack)
    // Appended to the error for a KV cache beyond the memory: the flags that size it.
    std::string memory_advice = "; lower --ctx or use --cache-type q8_0";
    std::function<void(const Op& op, double micros)> trace;  // per-op timing (MINFER_TRACE)
    DeviceChoice device;  // the backend to run graphs on (--device; backend/device.h)
    // Overrides `device` when set: a backend of the tests' making (one that fails on purpose,
    // one that counts what it is asked).
    std::function<std::unique_ptr<Backend>(const BackendOptions&, ThreadPool&)> make_backend;
};

struct SequenceParams {
    std::vector<int32_t> prompt;  // the whole prompt (with a continued sequence, all of it)
    SamplingParams sampling;
    int64_t n_predict = -1;         // tokens to generate at most; -1: until EOG or n_ctx
    std::vector<std::string> stop;  // generation ends before the first of these
    bool ignore_eog = false;        // keep generating past end-of-generation tokens (bench)
    bool generate = true;           // false: evaluate the prompt only (score)
    // Logits of every prompt position, not only of the last (score); the prefix cache is not used
    // for such a sequence, since cached positions have no logits.
    bool all_logits = false;
    // Receives every logits row computed for the sequence, in position order: each prompt
    // position with all_logits, and the row each token is sampled from. `pos` is the position of
    // the token the row was computed at (it predicts position pos + 1).
    std::function<void(int64_t pos, std::span<const float> logits)> on_logits;
    // Continue this kept sequence (see keep): the KV cache positions it shares with `prompt`
    // are kept, the rest evaluated.
    std::optional<SeqId> continue_from;
    // Keep the sequence's cache after it finishes, for continue_from (chat). Otherwise its blocks
    // go to the prefix cache when it finishes.
    bool keep = false;
    // Constrains the generated text to a grammar compiled for this model's vocabulary: each token
    // is sampled among those the grammar allows, and generation ends once the grammar is complete
    // and nothing may follow (or the model ends it where the grammar may end).
    std::shared_ptr<grammar::CompiledGrammar> grammar;
};

struct SequenceStats {
    int64_t n_prompt = 0;     // prompt tokens evaluated (not those reused from a cache)
    int64_t n_reused = 0;     // prompt tokens whose K/V came from the kept sequence or prefix cache
    double prompt_ms = 0;     // from submit to the first sampled token
    int64_t n_generated = 0;  // tokens sampled (an end-of-generation token included)
    double generation_ms = 0;  // from the first sampled token to the end
    double prompt_tokens_per_second() const {
        return prompt_ms > 0 ? 1000.0 * static_cast<double>(n_prompt) / prompt_ms : 0;
    }
    double generation_tokens_per_second() const {
        return generation_ms > 0 ? 1000.0 * static_cast<double>(n_generated) / generation_ms : 0;
    }
};

struct SequenceResult {
    std::string text;             // everything streamed
    std::vector<int32_t> tokens;  // the generated tokens (without the end-of-generation token)
    StopReason stop = StopReason::MaxTokens;
    std::string stop_string;  // the one that ended it, when stop is StopString
    SequenceStats stats;
};

struct SequenceEvent {
    SeqId id = 0;
    std::string text;    // text to show now (may be empty: a token can be half a character)
    int32_t token = -1;  // the sampled token, -1 when this event carries none
    bool finished = false;
    StopReason stop = StopReason::MaxTokens;  // when finished
};

class Engine {
  public:
    // Throws UsageError for bad options, LimitError when the KV pool exceeds the memory the
    // process may use.
    Engine(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
           const EngineOptions& options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // Queues a sequence. Throws LimitError when the prompt does not fit n_ctx, UsageError for an
    // empty prompt, a token id outside the vocabulary or bad sampling parameters.
    SeqId submit(SequenceParams params);
    // Ends the sequence at the next step with StopReason::Cancelled (no-op once finished).
    void cancel(SeqId id);
    // Forgets a finished sequence (a kept one's cache goes to the prefix cache).
    void release(SeqId id);

    // One forward pass over the next batch; returns the events of the sequences it advanced or
    // finished. Throws only for bugs (every input was checked by submit).
    std::vector<SequenceEvent> step();
    // True while a submitted sequence has not finished.
    bool busy() const;

    const SequenceResult& result(SeqId id) const;
    bool finished(SeqId id) const;
    // The tokens whose K/V the sequence holds (prompt and generated), position by position.
    std::span<const int32_t> cached_tokens(SeqId id) const;

    // The graph of the first forward pass of a sequence with this prompt (--dump-graph): the
    // logits of its last row, or of every row.
    Graph graph_for_prompt(std::span<const int32_t> prompt, bool all_logits = false) const;

    const Model& model() const { return *model_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    int64_t n_ctx() const { return n_ctx_; }
    int64_t n_batch() const { return n_batch_; }
    int n_threads() const;
    const PagedKvCache& kv() const { return kv_; }
    const Backend& backend() const { return *backend_; }

  private:
    struct Sequence;
    struct BatchEntry;
    Sequence& at(SeqId id);
    const Sequence& at(SeqId id) const;
    // Scheduling: which sequences' positions the next forward pass evaluates.
    std::vector<BatchEntry> plan_batch(std::vector<BlockCopy>& copies,
                                       std::vector<SequenceEvent>& events);
    bool schedule(Sequence& s, int64_t n, std::vector<BlockCopy>& copies,
                  std::vector<Sequence*>& preempted);
    Sequence* preempt_younger_than(const Sequence& s);
    // Batch assembly: the planned positions as one forward pass's inputs.
    BatchInputs batch_inputs(const std::vector<BatchEntry>& entries) const;
    // The hand-out: logits rows to on_logits, the next token of each sequence whose evaluated
    // positions reached its end, its text and its stop.
    void hand_out(const std::vector<BatchEntry>& entries, std::span<const float> logits,
                  std::vector<SequenceEvent>& events);
    void sample(Sequence& s, std::span<const float> logits, std::vector<SequenceEvent>& events);
    void finish(Sequence& s, StopReason reason, std::vector<SequenceEvent>& events);

    std::shared_ptr<const Model> model_;
    std::shared_ptr<const Tokenizer> tokenizer_;
    int64_t n_ctx_;
    int64_t n_batch_;
    int64_t prefill_chunk_;
    std::shared_ptr<ThreadPool> pool_;
    std::unique_ptr<Backend> backend_;
    PagedKvCache kv_;
    std::vector<std::unique_ptr<Sequence>> sequences_;  // in arrival order
    uint64_t arrivals_ = 0;
};

}  // namespace minfer
