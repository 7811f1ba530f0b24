#include "runtime/benchmark.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/error.h"

namespace minfer {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_tokens(int64_t n, int64_t n_vocab, std::mt19937& rng) {
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(n_vocab - 1));
    std::vector<int32_t> tokens(static_cast<std::size_t>(n));
    for (auto& t : tokens) t = id(rng);
    return tokens;
}

// Steps until every sequence in `ids` has finished (or, with until_sampled, sampled a token).
void run_until(Engine& engine, const std::vector<SeqId>& ids, bool until_sampled) {
    std::vector<bool> done(ids.size(), false);
    while (std::find(done.begin(), done.end(), false) != done.end()) {
        if (!engine.busy()) throw UsageError("bench: the engine stopped before the test ended");
        for (const SequenceEvent& e : engine.step()) {
            const auto it = std::find(ids.begin(), ids.end(), e.id);
            if (it == ids.end()) continue;
            if (e.finished || (until_sampled && e.token >= 0))
                done[static_cast<std::size_t>(it - ids.begin())] = true;
            if (e.finished && e.stop == StopReason::CacheFull)
                throw LimitError("bench: the KV cache is too small for the test");
        }
    }
}

SequenceParams greedy(std::vector<int32_t> prompt) {
    SequenceParams p;
    p.prompt = std::move(prompt);
    p.sampling.temperature = 0.0f;
    p.ignore_eog = true;
    return p;
}

// The depth of a test (-d): `tokens` prefilled and kept in the cache for a continuation to take
// over (none where there are no tokens).
std::optional<SeqId> prefill_kept(Engine& engine, const std::vector<int32_t>& tokens) {
    if (tokens.empty()) return std::nullopt;
    SequenceParams p = greedy(tokens);
    p.n_predict = 0;
    p.keep = true;
    const SeqId id = engine.submit(std::move(p));
    run_until(engine, {id}, false);
    return id;
}

BenchRun time_prompt(Engine& engine, const BenchTest& t, std::mt19937& rng) {
    const int64_t n_vocab = engine.model().hparams().n_vocab;
    std::vector<int32_t> tokens = random_tokens(t.n_depth, n_vocab, rng);
    const std::optional<SeqId> depth = prefill_kept(engine, tokens);
    const std::vector<int32_t> more = random_tokens(t.n_prompt, n_vocab, rng);
    tokens.insert(tokens.end(), more.begin(), more.end());
    SequenceParams p = greedy(std::move(tokens));
    p.n_predict = 0;  // the last row's logits are computed, nothing is sampled
    p.continue_from = depth;
    const auto start = Clock::now();
    const SeqId id = engine.submit(std::move(p));
    run_until(engine, {id}, false);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    engine.release(id);
    return BenchRun{ns, 0};
}

// -n without a prompt (tg128, -d: at a depth): the decode steps alone, timed once every sequence
// has sampled its first token.
BenchRun time_generation(Engine& engine, const BenchTest& t, std::mt19937& rng,
                         const std::function<void(int64_t)>& after_step) {
    const int64_t n_vocab = engine.model().hparams().n_vocab;
    std::vector<SeqId> ids;
    for (int64_t i = 0; i < t.n_parallel; ++i) {
        SequenceParams p = greedy(random_tokens(std::max<int64_t>(1, t.n_depth), n_vocab, rng));
        // Enough that no sequence ends during the measured steps, whichever step each started
        // decoding in.
        p.n_predict = t.n_gen + t.n_depth + 2;
        ids.push_back(engine.submit(std::move(p)));
    }
    run_until(engine, ids, true);
    double ns = 0, bytes = 0;
    for (int64_t step = 0; step < t.n_gen; ++step) {
        const auto start = Clock::now();
        engine.step();
        ns += std::chrono::duration<double, std::nano>(Clock::now() - start).count();
        bytes += static_cast<double>(engine.backend().weight_bytes_read());
        if (after_step) after_step(step);
    }
    for (SeqId id : ids) engine.cancel(id);
    run_until(engine, ids, false);
    for (SeqId id : ids) engine.release(id);
    return BenchRun{ns, t.n_gen > 0 ? bytes / static_cast<double>(t.n_gen) : 0};
}

// -np with a prompt (pp128+tg128): n_parallel sequences submitted at once, each with its own
// prompt of n_prompt tokens after its n_depth cached ones, timed from the submission until every
// sequence has generated n_gen tokens, so that prefill counts as a server's clients pay for it.
BenchRun time_prompt_and_generation(Engine& engine, const BenchTest& t, std::mt19937& rng) {
    const int64_t n_vocab = engine.model().hparams().n_vocab;
    std::vector<std::vector<int32_t>> prompts;
    std::vector<std::optional<SeqId>> depths;
    for (int64_t i = 0; i < t.n_parallel; ++i) {
        prompts.push_back(random_tokens(t.n_depth, n_vocab, rng));
        depths.push_back(prefill_kept(engine, prompts.back()));
    }
    std::vector<SeqId> ids;
    const auto start = Clock::now();
    for (int64_t i = 0; i < t.n_parallel; ++i) {
        auto& tokens = prompts[static_cast<std::size_t>(i)];
        const std::vector<int32_t> more = random_tokens(t.n_prompt, n_vocab, rng);
        tokens.insert(tokens.end(), more.begin(), more.end());
        SequenceParams p = greedy(std::move(tokens));
        p.n_predict = t.n_gen;
        p.continue_from = depths[static_cast<std::size_t>(i)];
        ids.push_back(engine.submit(std::move(p)));
    }
    run_until(engine, ids, false);
    const double ns = std::chrono::duration<double, std::nano>(Clock::now() - start).count();
    for (SeqId id : ids) engine.release(id);  // a continuation took over its kept depth
    return BenchRun{ns, 0};
}

}  // namespace

int64_t bench_tokens(const BenchTest& t) {
    return t.n_gen > 0 ? t.n_gen * t.n_parallel : t.n_prompt;
}

int64_t bench_positions(const BenchTest& t) {
    if (t.n_gen == 0) return t.n_depth + t.n_prompt;
    // The prompt, what decoding starts with, and as many steps again for the sequences that
    // began decoding while the others were still in their prompts.
    return std::max<int64_t>(1, t.n_depth + t.n_prompt) + 2 * t.n_gen + t.n_depth + t.n_prompt + 2;
}

BenchRun run_bench_test(Engine& engine, const BenchTest& test, std::mt19937& rng,
                        const std::function<void(int64_t)>& after_step) {
    if (test.n_gen == 0) return time_prompt(engine, test, rng);
    if (test.n_prompt > 0) return time_prompt_and_generation(engine, test, rng);
    return time_generation(engine, test, rng, after_step);
}

}  // namespace minfer
