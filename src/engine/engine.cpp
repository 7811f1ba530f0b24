#include "engine/engine.h"

#include <algorithm>

#include "core/cpu_set.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_limits.h"
#include "core/thread_pool.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kDefaultMaxContext = 4096;

double ms_between(Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
}

}  // namespace

// A submitted sequence. `tokens` is everything the sequence's KV cache should come to hold: the
// prompt, then each sampled token once it is to be evaluated. The positions its KV sequence holds
// (kv.length) are a prefix of it; the rest is evaluated by the coming steps.
struct Engine::Sequence {
    SeqId id = 0;
    uint64_t arrival = 0;
    SeqId kv_seq = 0;
    SequenceParams params;
    std::vector<int32_t> tokens;
    std::optional<SequenceOutput> output;  // sampler, grammar, detokenizer, stop strings
    bool sampled_any = false;              // in decoding: tokens.back() is a sampled token
    bool cancel_requested = false;
    bool finished = false;
    int64_t next_logits_pos = 0;  // on_logits: rows of positions below were reported
    SequenceResult result;
    Clock::time_point submitted, first_sample;

    // Whether the forward pass computes the logits row of position pos: every position's for
    // all_logits, else the last one's when the sequence generates.
    bool wants_logits(int64_t pos) const {
        return params.all_logits ||
               (params.generate && pos + 1 == static_cast<int64_t>(tokens.size()));
    }
};

// The rows one sequence contributes to a batch.
struct Engine::BatchEntry {
    Sequence* seq;
    int64_t first_pos;  // its first position (= the KV length before this batch)
    int64_t count;
};

Engine::Engine(std::shared_ptr<const Model> model, std::shared_ptr<const Tokenizer> tokenizer,
               const EngineOptions& options)
    : model_(std::move(model)),
      tokenizer_(std::move(tokenizer)),
      n_ctx_(options.n_ctx),
      n_batch_(options.n_batch),
      prefill_chunk_(options.prefill_chunk),
      kv_(1, kKvBlockSize) {
    const HParams& hp = model_->hparams();
    if (n_ctx_ < 0) throw UsageError(concat("context length must be positive, got ", n_ctx_));
    if (n_ctx_ == 0) n_ctx_ = std::min(kDefaultMaxContext, hp.n_ctx_train);
    if (n_ctx_ > hp.n_ctx_train) {
        log_warning(concat("a context of ", n_ctx_, " tokens exceeds the ", hp.n_ctx_train,
                           " the model was trained for; its answers degrade beyond that"));
    }
    if (n_batch_ < 1) throw UsageError(concat("batch size must be at least 1, got ", n_batch_));
    if (prefill_chunk_ < 0)
        throw UsageError(concat("the prefill chunk must be 0 or more, got ", prefill_chunk_));
    const int64_t kv_tokens = options.kv_tokens > 0 ? options.kv_tokens : n_ctx_;
    if (kv_tokens > kMaxKvTokens)
        throw UsageError(concat("a KV cache of ", kv_tokens, " tokens is beyond any machine"));
    const int64_t n_blocks = (kv_tokens + kKvBlockSize - 1) / kKvBlockSize;
    const KvCacheSpec spec = model_->kv_cache_spec(options.kv_type, n_blocks);
    // Refused before anything is allocated, with the sizes, rather than std::bad_alloc later.
    require_memory(
        spec.bytes(),
        concat("a KV cache of ", kv_tokens, " tokens (", type_name(options.kv_type), ")"),
        options.memory_advice);
    static_assert(PagedKvCache::kFreed == kFreedBlock);
    kv_ = PagedKvCache(static_cast<int32_t>(n_blocks), kKvBlockSize, model_->kv_window());
    pool_ =
        shared_thread_pool(clamp_thread_count(options.n_threads, "n_threads"), options.pin_threads);
    BackendOptions b;
    b.n_vocab = hp.n_vocab;
    b.kv = spec;
    b.batch_invariant = options.batch_invariant;
    b.repack_weights = options.repack_weights;
    b.trace = options.trace;
    backend_ = options.make_backend ? options.make_backend(b, *pool_)
                                    : make_backend(options.device, b, *pool_);
    // Weight preparation (the CPU backend's repacking) at load rather than in the first request.
    const int32_t first_token = 0;
    backend_->prepare(graph_for_prompt(std::span(&first_token, 1)));
}

Engine::~Engine() = default;

int Engine::n_threads() const {
    return pool_->size();
}

Engine::Sequence& Engine::at(SeqId id) {
    for (auto& s : sequences_) {
        if (s->id == id) return *s;
    }
    throw UsageError(concat("sequence ", id, " does not exist"));
}

const Engine::Sequence& Engine::at(SeqId id) const {
    for (const auto& s : sequences_) {
        if (s->id == id) return *s;
    }
    throw UsageError(concat("sequence ", id, " does not exist"));
}

SeqId Engine::submit(SequenceParams params) {
    const int64_t n_vocab = model_->hparams().n_vocab;
    if (params.prompt.empty())
        throw UsageError("the prompt is empty: there is nothing to continue");
    for (const int32_t id : params.prompt) {
        if (id < 0 || id >= n_vocab)
            throw UsageError(
                concat("token id ", id, " is out of range: the model has ", n_vocab, " tokens"));
    }
    if (static_cast<int64_t>(params.prompt.size()) > n_ctx_) {
        throw LimitError(concat("the prompt of ", params.prompt.size(),
                                " tokens does not fit the context of ", n_ctx_,
                                " tokens; raise --ctx or shorten the prompt"));
    }
    if (params.grammar && params.grammar->vocabulary().n_vocab() > n_vocab)
        throw UsageError(concat("the grammar was compiled for a vocabulary of ",
                                params.grammar->vocabulary().n_vocab(), " tokens, the model has ",
                                n_vocab));
    auto s = std::make_unique<Sequence>();
    s->output.emplace(OutputParams{params.sampling, params.grammar, params.stop, params.ignore_eog},
                      params.prompt, *tokenizer_, static_cast<int32_t>(n_vocab),
                      arrivals_ + 1);  // validates the sampling parameters
    s->arrival = ++arrivals_;
    s->id = static_cast<SeqId>(s->arrival);
    s->submitted = Clock::now();
    s->tokens = params.prompt;

    if (params.continue_from) {
        Sequence& kept = at(*params.continue_from);
        if (!kept.finished || !kept.params.keep)
            throw UsageError(concat("sequence ", kept.id, " is not a finished, kept sequence"));
        // The positions both share stay; at least one prompt token is evaluated again, for its
        // logits.
        const auto cached = kv_.tokens(kept.kv_seq);
        std::size_t common = 0;
        while (common < cached.size() && common + 1 < s->tokens.size() &&
               cached[common] == s->tokens[common])
            ++common;
        if (params.all_logits) common = 0;
        // (Less, or nothing, when a sliding window freed what the rest would attend to.)
        s->result.stats.n_reused = kv_.truncate(kept.kv_seq, static_cast<int64_t>(common));
        s->kv_seq = kept.kv_seq;
        kept.params.keep = false;  // its cache now belongs to the new sequence
        kept.kv_seq = 0;
        std::erase_if(sequences_, [&](const auto& q) { return q.get() == &kept; });
    } else {
        s->kv_seq = kv_.add();
    }
    s->params = std::move(params);
    const SeqId id = s->id;
    sequences_.push_back(std::move(s));
    return id;
}

void Engine::cancel(SeqId id) {
    Sequence& s = at(id);
    if (!s.finished) s.cancel_requested = true;
}

void Engine::release(SeqId id) {
    Sequence& s = at(id);
    if (!s.finished) throw UsageError(concat("sequence ", id, " is still running"));
    if (s.kv_seq != 0 && kv_.contains(s.kv_seq)) kv_.remove(s.kv_seq);
    std::erase_if(sequences_, [&](const auto& q) { return q.get() == &s; });
}

bool Engine::busy() const {
    return std::any_of(sequences_.begin(), sequences_.end(),
                       [](const auto& s) { return !s->finished; });
}

const SequenceResult& Engine::result(SeqId id) const {
    return at(id).result;
}

bool Engine::finished(SeqId id) const {
    return at(id).finished;
}

std::span<const int32_t> Engine::cached_tokens(SeqId id) const {
    const Sequence& s = at(id);
    if (s.kv_seq == 0 || !kv_.contains(s.kv_seq)) return {};
    return kv_.tokens(s.kv_seq);
}

void Engine::finish(Sequence& s, StopReason reason, std::vector<SequenceEvent>& events) {
    if (s.finished) return;
    std::string text = s.output->finish();
    s.result.text += text;
    s.result.stop = reason;
    if (reason == StopReason::StopString) s.result.stop_string = s.output->stop_string();
    s.finished = true;
    const auto now = Clock::now();
    if (s.sampled_any) {
        s.result.stats.generation_ms = ms_between(s.first_sample, now);
    } else {
        s.result.stats.prompt_ms = ms_between(s.submitted, now);
    }
    // Its blocks go to the prefix cache, unless the caller keeps them to continue.
    if (!s.params.keep) {
        kv_.remove(s.kv_seq);
        s.kv_seq = 0;
    }
    SequenceEvent e;
    e.id = s.id;
    e.text = std::move(text);
    e.finished = true;
    e.stop = reason;
    events.push_back(std::move(e));
}

// The next token of `s` from its last row's logits: the checks in the order generation has always
// made them (the token limit, the choice, a stop string, the context, the token limit).
void Engine::sample(Sequence& s, std::span<const float> logits,
                    std::vector<SequenceEvent>& events) {
    const auto now = Clock::now();
    if (!s.sampled_any) {
        s.sampled_any = true;
        s.first_sample = now;
        s.result.stats.prompt_ms = ms_between(s.submitted, now);
    }
    const auto& p = s.params;
    if (p.n_predict >= 0 && static_cast<int64_t>(s.result.tokens.size()) >= p.n_predict)
        return finish(s, StopReason::MaxTokens, events);
    const SequenceOutput::Choice choice = s.output->choose(logits);
    if (choice.token >= 0) ++s.result.stats.n_generated;
    if (choice.stop) return finish(s, *choice.stop, events);
    s.result.tokens.push_back(choice.token);
    SequenceEvent e;
    e.id = s.id;
    e.token = choice.token;
    e.text = s.output->emit(choice.token);
    s.result.text += e.text;
    events.push_back(std::move(e));
    if (s.output->stop_string_seen()) return finish(s, StopReason::StopString, events);
    if (static_cast<int64_t>(s.tokens.size()) >= n_ctx_)
        return finish(s, StopReason::ContextFull, events);
    if (p.n_predict >= 0 && static_cast<int64_t>(s.result.tokens.size()) >= p.n_predict)
        return finish(s, StopReason::MaxTokens, events);
    s.tokens.push_back(choice.token);  // evaluated by the next step
}

// Frees the KV blocks of a finished sequence kept for continuation, else of the youngest
// sequence younger than `s` that holds any: its tokens are evaluated again when it is scheduled
// next. Returns it, or null when there is none.
Engine::Sequence* Engine::preempt_younger_than(const Sequence& s) {
    Sequence* victim = nullptr;
    for (auto& q : sequences_) {
        if (q.get() == &s || q->kv_seq == 0 || kv_.block_table(q->kv_seq).empty()) continue;
        if (q->finished) {
            victim = q.get();
            break;
        }
        if (q->arrival > s.arrival && (victim == nullptr || q->arrival > victim->arrival))
            victim = q.get();
    }
    if (victim == nullptr) return nullptr;
    kv_.remove(victim->kv_seq);
    if (victim->finished) {
        victim->kv_seq = 0;
        victim->params.keep = false;
    } else {
        victim->kv_seq = kv_.add();
    }
    return victim;
}

// Reserves n positions of `s`, preempting younger sequences while the pool is short (they are
// added to `preempted`). False when `s` must wait for older sequences to free blocks.
bool Engine::schedule(Sequence& s, int64_t n, std::vector<BlockCopy>& copies,
                      std::vector<Sequence*>& preempted) {
    while (!kv_.reserve(s.kv_seq, n, copies)) {
        Sequence* victim = preempt_younger_than(s);
        if (victim == nullptr) return false;
        preempted.push_back(victim);
    }
    return true;
}

std::vector<SequenceEvent> Engine::step() {
    std::vector<SequenceEvent> events;
    for (auto& s : sequences_) {
        if (!s->finished && s->cancel_requested) finish(*s, StopReason::Cancelled, events);
    }
    std::vector<BlockCopy> copies;
    const std::vector<BatchEntry> entries = plan_batch(copies, events);
    if (entries.empty()) return events;
    BatchInputs inputs = batch_inputs(entries);
    for (const BlockCopy& c : copies) backend_->copy_kv_block(c.from, c.to, c.n_positions);
    backend_->execute(model_->record(std::move(inputs), kv_.block_size(), n_ctx_));
    hand_out(entries, backend_->logits(), events);
    return events;
}

// The batch: decoding sequences first (one token each), then prompt chunks in arrival order.
std::vector<Engine::BatchEntry> Engine::plan_batch(std::vector<BlockCopy>& copies,
                                                   std::vector<SequenceEvent>& events) {
    std::vector<BatchEntry> entries;
    std::vector<Sequence*> preempted;
    int64_t budget = n_batch_;
    const int64_t block = kv_.block_size();
    const auto scheduled = [&](const Sequence* s) {
        return std::any_of(entries.begin(), entries.end(),
                           [&](const BatchEntry& e) { return e.seq == s; });
    };
    const auto add_entry = [&](Sequence& s, int64_t n) {
        const int64_t first = kv_.length(s.kv_seq);
        if (!schedule(s, n, copies, preempted)) {
            // Waiting for older sequences, unless it could not fit even with the whole pool
            // (with a sliding window, the blocks it holds are those its window reaches).
            const int64_t blocks = kv_.window() > 0
                                       ? kv_.blocks_held(s.kv_seq) + kv_.blocks_needed(s.kv_seq, n)
                                       : (first + n + block - 1) / block;
            if (blocks > kv_.pool().n_blocks()) finish(s, StopReason::CacheFull, events);
            return;
        }
        entries.push_back(BatchEntry{&s, first, n});
        budget -= n;
    };
    for (auto& s : sequences_) {
        if (budget == 0) break;
        if (s->finished || !s->sampled_any) continue;
        if (static_cast<int64_t>(s->tokens.size()) - kv_.length(s->kv_seq) == 1) add_entry(*s, 1);
    }
    // While others decode, prompts get at most prefill_chunk tokens of the step: a long prompt
    // then delays the others' next token by a fraction of its prefill, not all of it.
    const int64_t budget_before_prompts = budget;
    const int64_t prompt_budget =
        !entries.empty() && prefill_chunk_ > 0 ? std::min(budget, prefill_chunk_) : budget;
    const auto prompt_room = [&] { return prompt_budget - (budget_before_prompts - budget); };
    for (auto& s : sequences_) {
        if (prompt_room() <= 0) break;
        if (s->finished || scheduled(s.get())) continue;
        int64_t length = kv_.length(s->kv_seq);
        if (!s->params.all_logits && length % block == 0) {
            const int64_t attached = kv_.attach_cached_prefix(
                s->kv_seq, s->tokens, static_cast<int64_t>(s->tokens.size()) - 1);
            s->result.stats.n_reused += attached;
            length += attached;
        }
        const int64_t n =
            std::min<int64_t>(static_cast<int64_t>(s->tokens.size()) - length, prompt_room());
        if (n > 0) add_entry(*s, n);
    }
    // Preemption may have taken the blocks of sequences scheduled before it.
    std::erase_if(entries, [&](const BatchEntry& e) {
        return std::find(preempted.begin(), preempted.end(), e.seq) != preempted.end();
    });
    return entries;
}

BatchInputs Engine::batch_inputs(const std::vector<BatchEntry>& entries) const {
    BatchInputs in;
    in.table_begin.push_back(0);
    int64_t rows = 0;
    for (const BatchEntry& e : entries) {
        const Sequence& s = *e.seq;
        const auto seq_index = static_cast<int32_t>(in.table_begin.size() - 1);
        for (int64_t i = 0; i < e.count; ++i) {
            const int64_t pos = e.first_pos + i;
            in.tokens.push_back(s.tokens[static_cast<std::size_t>(pos)]);
            in.positions.push_back(static_cast<int32_t>(pos));
            in.kv_slots.push_back(kv_.slot(s.kv_seq, pos));
            in.sequence.push_back(seq_index);
            if (s.wants_logits(pos)) in.output_rows.push_back(static_cast<int32_t>(rows + i));
        }
        const auto table = kv_.block_table(s.kv_seq);
        in.table_blocks.insert(in.table_blocks.end(), table.begin(), table.end());
        in.table_begin.push_back(static_cast<int32_t>(in.table_blocks.size()));
        rows += e.count;
    }
    return in;
}

void Engine::hand_out(const std::vector<BatchEntry>& entries, std::span<const float> logits,
                      std::vector<SequenceEvent>& events) {
    const auto n_vocab = static_cast<std::size_t>(model_->hparams().n_vocab);
    std::size_t output = 0;
    for (const BatchEntry& e : entries) {
        Sequence& s = *e.seq;
        kv_.commit(s.kv_seq, std::span(s.tokens).subspan(static_cast<std::size_t>(e.first_pos),
                                                         static_cast<std::size_t>(e.count)));
        if (!s.sampled_any) s.result.stats.n_prompt += e.count;
        const bool reached_end = e.first_pos + e.count == static_cast<int64_t>(s.tokens.size());
        std::span<const float> last_row;
        for (int64_t i = 0; i < e.count; ++i) {
            const int64_t pos = e.first_pos + i;
            if (!s.wants_logits(pos)) continue;
            last_row = logits.subspan(output * n_vocab, n_vocab);
            ++output;
            // A preempted sequence computes its rows again: each is reported once.
            if (s.params.on_logits && pos >= s.next_logits_pos) {
                s.params.on_logits(pos, last_row);
                s.next_logits_pos = pos + 1;
            }
        }
        if (!reached_end) continue;
        if (s.params.generate) {
            sample(s, last_row, events);
        } else {
            finish(s, StopReason::PromptDone, events);
        }
    }
}

Graph Engine::graph_for_prompt(std::span<const int32_t> prompt, bool all_logits) const {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(prompt.size()), n_batch_);
    BatchInputs in;
    for (int64_t i = 0; i < n; ++i) {
        in.tokens.push_back(prompt[static_cast<std::size_t>(i)]);
        in.positions.push_back(static_cast<int32_t>(i));
        in.kv_slots.push_back(static_cast<int32_t>(i));  // blocks 0, 1, ... in order
        in.sequence.push_back(0);
        if (all_logits) in.output_rows.push_back(static_cast<int32_t>(i));
    }
    in.table_begin = {0, static_cast<int32_t>((n + kv_.block_size() - 1) / kv_.block_size())};
    for (int32_t b = 0; b < in.table_begin[1]; ++b) in.table_blocks.push_back(b);
    if (n > 0 && !all_logits) in.output_rows.push_back(static_cast<int32_t>(n - 1));
    return model_->record(std::move(in), kv_.block_size(), n_ctx_);
}

}  // namespace minfer
