// The engine's sequence management on a real model: the prefix cache (shared prompts computed
// once, with the same bits as computed again), preemption when the KV pool runs short, a
// sequence too large for the pool, cancellation, continuing a kept sequence after an edit, and
// the checks submit() makes. Batch-invariant mode makes "the same result" a bit-for-bit check.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "core/error.h"
#include "runtime/generation.h"

namespace minfer {
namespace {

const char* const kModel = "models/tiny-qwen2-q8_0.gguf";

std::vector<int32_t> random_tokens(std::size_t n, unsigned seed, int32_t n_vocab) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
    std::vector<int32_t> out(n);
    for (auto& t : out) t = token(rng);
    return out;
}

SequenceParams greedy(std::vector<int32_t> prompt, int64_t n_predict) {
    SequenceParams p;
    p.prompt = std::move(prompt);
    p.sampling.temperature = 0.0f;
    p.n_predict = n_predict;
    p.ignore_eog = true;
    return p;
}

EngineOptions options(int64_t kv_tokens, int64_t n_batch = 512) {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 128;
    o.kv_tokens = kv_tokens;
    o.n_batch = n_batch;
    o.batch_invariant = true;
    return o;
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The logits row a sequence's first token is sampled from.
struct FirstRow {
    std::vector<float> row;
    void attach(SequenceParams& p, int64_t last_prompt_pos) {
        p.on_logits = [this, last_prompt_pos](int64_t pos, std::span<const float> logits) {
            if (pos == last_prompt_pos) row.assign(logits.begin(), logits.end());
        };
    }
};

TEST(PrefixCache, ASharedPromptIsComputedOnceWithTheSameBits) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(1024, 16));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    const std::vector<int32_t> system = random_tokens(50, 7, n_vocab);  // 3 whole blocks + 2
    const auto prompt_with = [&](unsigned seed) {
        std::vector<int32_t> p = system;
        const auto tail = random_tokens(6, seed, n_vocab);
        p.insert(p.end(), tail.begin(), tail.end());
        return p;
    };

    // Each prompt alone on a fresh engine: the reference rows.
    std::vector<FirstRow> alone(5);
    for (unsigned i = 0; i < alone.size(); ++i) {
        auto fresh = test::make_engine(model_path, options(1024));
        SequenceParams p = greedy(prompt_with(100 + i), 2);
        alone[i].attach(p, 55);
        const Generation g = generate(*fresh.engine, std::move(p), nullptr);
        EXPECT_EQ(g.result.stats.n_reused, 0);
    }

    // The first sequence fills the cache, the four others arrive together while nothing runs.
    std::vector<FirstRow> shared(5);
    SequenceParams first = greedy(prompt_with(100), 2);
    shared[0].attach(first, 55);
    generate(*t.engine, std::move(first), nullptr);
    std::vector<SeqId> ids;
    for (unsigned i = 1; i < shared.size(); ++i) {
        SequenceParams p = greedy(prompt_with(100 + i), 2);
        shared[i].attach(p, 55);
        ids.push_back(t.engine->submit(std::move(p)));
    }
    while (t.engine->busy()) t.engine->step();

    for (std::size_t i = 0; i < ids.size(); ++i) {
        // The 48 positions of the three whole blocks of the system prompt come from the cache.
        EXPECT_EQ(t.engine->result(ids[i]).stats.n_reused, 48);
        EXPECT_EQ(t.engine->result(ids[i]).stats.n_prompt, 8);
    }
    EXPECT_EQ(t.engine->kv().prefix_hits(), 4 * 48);
    for (std::size_t i = 0; i < shared.size(); ++i) {
        EXPECT_TRUE(same_bits(shared[i].row, alone[i].row)) << "sequence " << i;
    }
}

// Requests with the same system prompt prefilled in the same step all compute its blocks (none
// is cached yet), then keep one copy: the others go back to the pool, and the sequences go on
// with the same bits as alone.
TEST(PrefixCache, SamePromptPrefilledTogetherKeepsOneCopyOfItsBlocks) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(1024));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    const std::vector<int32_t> system = random_tokens(48, 11, n_vocab);  // 3 whole blocks
    std::vector<SeqId> ids;
    std::vector<FirstRow> together(4);
    for (unsigned i = 0; i < together.size(); ++i) {
        std::vector<int32_t> p = system;
        const auto tail = random_tokens(8, 200 + i, n_vocab);
        p.insert(p.end(), tail.begin(), tail.end());
        SequenceParams params = greedy(p, 2);
        together[i].attach(params, 55);
        ids.push_back(t.engine->submit(std::move(params)));
    }
    const int32_t blocks = t.engine->kv().pool().n_blocks();
    t.engine->step();  // the four prompts in one batch
    // 3 shared blocks + one block of its own tail each, instead of 4 x 4.
    EXPECT_EQ(blocks - t.engine->kv().pool().n_available(), 3 + 4);
    while (t.engine->busy()) t.engine->step();
    for (unsigned i = 0; i < together.size(); ++i) {
        auto fresh = test::make_engine(model_path, options(1024));
        std::vector<int32_t> p = system;
        const auto tail = random_tokens(8, 200 + i, n_vocab);
        p.insert(p.end(), tail.begin(), tail.end());
        SequenceParams params = greedy(p, 2);
        FirstRow alone;
        alone.attach(params, 55);
        const Generation g = generate(*fresh.engine, std::move(params), nullptr);
        EXPECT_TRUE(same_bits(together[i].row, alone.row)) << "sequence " << i;
        EXPECT_EQ(t.engine->result(ids[i]).tokens, g.result.tokens) << "sequence " << i;
    }
}

TEST(PrefixCache, APromptThatDiffersInOneTokenIsNotServedAnothersCache) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(1024));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    std::vector<int32_t> a = random_tokens(40, 3, n_vocab);
    std::vector<int32_t> b = a;
    b[20] = (b[20] + 1) % n_vocab;  // in the second block
    generate(*t.engine, greedy(a, 1), nullptr);
    const Generation g = generate(*t.engine, greedy(b, 1), nullptr);
    EXPECT_EQ(g.result.stats.n_reused, 16);  // the first block only
}

// Three sequences that each need 3 blocks, in a pool of 4: the youngest are preempted (their
// blocks freed and their tokens evaluated again later), and every sequence still ends with the
// tokens and logits it has alone.
TEST(Preemption, SequencesThatDoNotFitTogetherFinishOneAfterAnother) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(64));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    std::vector<std::vector<int32_t>> alone_tokens;
    for (unsigned i = 0; i < 3; ++i) {
        auto fresh = test::make_engine(model_path, options(64));
        alone_tokens.push_back(
            generate(*fresh.engine, greedy(random_tokens(20, 40 + i, n_vocab), 20), nullptr)
                .result.tokens);
    }
    std::vector<SeqId> ids;
    for (unsigned i = 0; i < 3; ++i)
        ids.push_back(t.engine->submit(greedy(random_tokens(20, 40 + i, n_vocab), 20)));
    int steps = 0;
    while (t.engine->busy()) {
        t.engine->step();
        ASSERT_LT(++steps, 500);
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const SequenceResult& r = t.engine->result(ids[i]);
        EXPECT_EQ(r.stop, StopReason::MaxTokens) << stop_reason_name(r.stop);
        EXPECT_EQ(r.tokens, alone_tokens[i]) << "sequence " << i;
        t.engine->release(ids[i]);
    }
    EXPECT_EQ(t.engine->kv().pool().n_available(), t.engine->kv().pool().n_blocks());
}

TEST(Preemption, ASequenceLargerThanThePoolEndsWithCacheFull) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(32));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    const SeqId small = t.engine->submit(greedy(random_tokens(10, 1, n_vocab), 4));
    const SeqId large = t.engine->submit(greedy(random_tokens(40, 2, n_vocab), 4));
    int steps = 0;
    while (t.engine->busy()) {
        t.engine->step();
        ASSERT_LT(++steps, 100);
    }
    EXPECT_EQ(t.engine->result(small).stop, StopReason::MaxTokens);
    EXPECT_EQ(t.engine->result(large).stop, StopReason::CacheFull);
    EXPECT_TRUE(t.engine->result(large).tokens.empty());
    // A sequence that fills the pool while generating ends the same way, never overwriting.
    const Generation g = generate(*t.engine, greedy(random_tokens(20, 3, n_vocab), 40), nullptr);
    EXPECT_EQ(g.result.stop, StopReason::CacheFull);
    // 32 positions: 20 of prompt and 12 generated tokens evaluated; the 13th was sampled from the
    // last row but has no room.
    EXPECT_EQ(g.result.tokens.size(), 13u);
}

TEST(Cancellation, ACancelledSequenceEndsAtTheNextStepAndFreesItsBlocks) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(256));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    const SeqId keep_going = t.engine->submit(greedy(random_tokens(30, 5, n_vocab), 10));
    const SeqId cancelled = t.engine->submit(greedy(random_tokens(30, 6, n_vocab), 50));
    t.engine->step();
    t.engine->step();
    t.engine->cancel(cancelled);
    const std::vector<SequenceEvent> events = t.engine->step();
    bool reported = false;
    for (const auto& e : events) {
        if (e.id == cancelled) {
            EXPECT_TRUE(e.finished);
            EXPECT_EQ(e.stop, StopReason::Cancelled);
            reported = true;
        }
    }
    EXPECT_TRUE(reported);
    while (t.engine->busy()) t.engine->step();
    EXPECT_EQ(t.engine->result(keep_going).stop, StopReason::MaxTokens);
    t.engine->release(keep_going);
    t.engine->release(cancelled);
    // Nothing is held: every block is free or idle in the prefix cache.
    EXPECT_EQ(t.engine->kv().pool().n_available(), t.engine->kv().pool().n_blocks());
}

// A kept sequence continued with an edited history (chat: a message changed) keeps the positions
// both share, evaluates the rest, and gets the logits of a fresh evaluation.
TEST(Continuation, AnEditedHistoryKeepsTheCommonPositionsOnly) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(512));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    std::vector<int32_t> history = random_tokens(37, 11, n_vocab);
    SequenceParams first = greedy(history, 5);
    first.keep = true;
    const Generation g1 = generate(*t.engine, std::move(first), nullptr);
    // The edit: position 30 changes; the conversation goes on with 9 new tokens.
    std::vector<int32_t> edited(t.engine->cached_tokens(g1.id).begin(),
                                t.engine->cached_tokens(g1.id).end());
    edited[30] = (edited[30] + 1) % n_vocab;
    const auto more = random_tokens(9, 12, n_vocab);
    edited.insert(edited.end(), more.begin(), more.end());

    SequenceParams second = greedy(edited, 3);
    second.continue_from = g1.id;
    FirstRow continued;
    continued.attach(second, static_cast<int64_t>(edited.size()) - 1);
    const Generation g2 = generate(*t.engine, std::move(second), nullptr);
    EXPECT_EQ(g2.result.stats.n_reused, 30);

    auto fresh = test::make_engine(model_path, options(512));
    SequenceParams again = greedy(edited, 3);
    FirstRow reference;
    reference.attach(again, static_cast<int64_t>(edited.size()) - 1);
    const Generation g3 = generate(*fresh.engine, std::move(again), nullptr);
    EXPECT_TRUE(same_bits(continued.row, reference.row));
    EXPECT_EQ(g2.result.tokens, g3.result.tokens);
}

// A model whose every layer has a sliding window (tiny-phi3: 64 positions) frees the blocks
// behind it: a kept sequence of 207 positions holds 4 blocks of 16, not 13. Continuing it with
// more tokens reuses every position; continuing it after an edit whose window reaches a freed
// block (keys that are gone) starts the sequence over, and the prefix cache, which kept the freed
// blocks it had registered, gives back the 12 whole blocks before the edit. Both give a fresh
// evaluation's bits.
TEST(SlidingWindow, ASequenceHoldsOnlyTheBlocksItsWindowReaches) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-phi3-f16.gguf");
    EngineOptions o = options(512);
    o.n_ctx = 512;
    auto t = test::make_engine(model_path, o);
    ASSERT_EQ(t.model.model->kv_window(), 64);
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    SequenceParams first = greedy(random_tokens(200, 21, n_vocab), 8);
    first.keep = true;
    const Generation g1 = generate(*t.engine, std::move(first), nullptr);
    std::vector<int32_t> history(t.engine->cached_tokens(g1.id).begin(),
                                 t.engine->cached_tokens(g1.id).end());
    ASSERT_EQ(history.size(), 207u);  // the last sampled token is not evaluated
    // The next position, 207, sees 144..207: blocks 9..12 are held, 0..8 freed.
    EXPECT_EQ(t.engine->kv().pool().n_available(), 32 - 4);

    SeqId kept = g1.id;
    const auto more = random_tokens(5, 23, n_vocab);
    for (const bool edit : {false, true}) {
        SCOPED_TRACE(edit ? "edited at 200" : "appended");
        std::vector<int32_t> prompt = history;
        if (edit) prompt[200] = (prompt[200] + 1) % n_vocab;  // its window starts at 137
        prompt.insert(prompt.end(), more.begin(), more.end());
        SequenceParams again = greedy(prompt, 3);
        again.continue_from = kept;
        again.keep = true;
        FirstRow continued;
        continued.attach(again, static_cast<int64_t>(prompt.size()) - 1);
        const Generation g2 = generate(*t.engine, std::move(again), nullptr);
        kept = g2.id;
        EXPECT_EQ(g2.result.stats.n_reused, edit ? 192 : 207);
        history.assign(t.engine->cached_tokens(kept).begin(), t.engine->cached_tokens(kept).end());

        auto fresh = test::make_engine(model_path, o);
        SequenceParams reference_params = greedy(prompt, 3);
        FirstRow reference;
        reference.attach(reference_params, static_cast<int64_t>(prompt.size()) - 1);
        const Generation g3 = generate(*fresh.engine, std::move(reference_params), nullptr);
        EXPECT_TRUE(same_bits(continued.row, reference.row));
        EXPECT_EQ(g2.result.tokens, g3.result.tokens);
    }
}

// With a sliding window a sequence may grow past the pool: 7 blocks of 16 hold 112 positions,
// and a sequence of 220 needs only the blocks its window of 64 reaches. It runs to its token
// limit (not `cache`), and generates what it generates with a pool of 512 positions.
TEST(SlidingWindow, ASequenceOutgrowsAPoolItsWindowFits) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-phi3-q8_0.gguf");
    EngineOptions small = options(7 * 16);
    small.n_ctx = 512;
    EngineOptions large = options(512);
    large.n_ctx = 512;
    auto a = test::make_engine(model_path, small);
    auto b = test::make_engine(model_path, large);
    const auto n_vocab = static_cast<int32_t>(a.model.model->hparams().n_vocab);
    const auto prompt = random_tokens(20, 24, n_vocab);
    const Generation ga = generate(*a.engine, greedy(prompt, 200), nullptr);
    const Generation gb = generate(*b.engine, greedy(prompt, 200), nullptr);
    EXPECT_EQ(ga.result.stop, StopReason::MaxTokens);
    EXPECT_EQ(ga.result.tokens.size(), 200u);
    EXPECT_EQ(ga.result.tokens, gb.result.tokens);
}

// A model with global layers (gemma2: every other layer sees everything) frees nothing.
TEST(SlidingWindow, ModelsWithGlobalLayersKeepEveryBlock) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-gemma2-q8_0.gguf");
    EngineOptions o = options(512);
    o.n_ctx = 512;
    auto t = test::make_engine(model_path, o);
    EXPECT_EQ(t.model.model->kv_window(), 0);
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    SequenceParams p = greedy(random_tokens(200, 22, n_vocab), 1);
    p.keep = true;
    generate(*t.engine, std::move(p), nullptr);
    EXPECT_EQ(t.engine->kv().pool().n_available(), 32 - 13);  // 200 positions: 13 blocks
}

// The CPU backend counts the weight bytes a step reads: one token of a mixture of experts reads
// exactly what Model::bytes_per_token says (k of the n experts per layer), two tokens that pick
// different experts read more, never more than all of them.
TEST(WeightBytesRead, ADecodeStepReadsTheExpertsItsTokensPicked) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-mixtral-q8_0.gguf");
    auto t = test::make_engine(model_path, options(512));
    const Model& model = *t.model.model;
    const auto n_vocab = static_cast<int32_t>(model.hparams().n_vocab);
    SequenceParams p = greedy(random_tokens(5, 31, n_vocab), 2);
    const SeqId one = t.engine->submit(std::move(p));
    t.engine->step();  // the prompt
    t.engine->step();  // one token decoded
    EXPECT_EQ(t.engine->backend().weight_bytes_read(), model.bytes_per_token());
    while (t.engine->busy()) t.engine->step();
    t.engine->release(one);

    uint64_t all_experts = 0, rest = 0;
    for (const TensorInfo* info : model.file().tensors()) {
        if (info->name.find("_exps.") != std::string::npos) {
            all_experts += info->n_bytes;
        } else if (info->name != "token_embd.weight") {
            rest += info->n_bytes;
        }
    }
    for (int i = 0; i < 2; ++i) t.engine->submit(greedy(random_tokens(5, 40 + i, n_vocab), 2));
    t.engine->step();
    t.engine->step();  // both decode in this step
    const uint64_t two = t.engine->backend().weight_bytes_read();
    EXPECT_GE(two, model.bytes_per_token());
    EXPECT_LE(two, rest + all_experts + 2 * 256 * 34 / 32);  // + two embedding rows (q8_0)
}

// --prefill-chunk: while a sequence decodes, a waiting prompt advances by at most that many
// tokens a step (its own first step is not limited: nobody else decodes then).
TEST(PrefillChunk, LimitsPromptTokensWhileOthersDecode) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    EngineOptions o = options(512);
    o.prefill_chunk = 8;
    auto t = test::make_engine(model_path, o);
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    const SeqId decoding = t.engine->submit(greedy(random_tokens(10, 21, n_vocab), 40));
    t.engine->step();  // its prompt, alone: all 10 tokens
    EXPECT_EQ(t.engine->cached_tokens(decoding).size(), 10u);
    const SeqId waiting = t.engine->submit(greedy(random_tokens(30, 22, n_vocab), 2));
    for (std::size_t step = 1; step <= 3; ++step) {
        t.engine->step();
        EXPECT_EQ(t.engine->cached_tokens(waiting).size(), 8 * step) << "step " << step;
    }
    while (t.engine->busy()) t.engine->step();
    EXPECT_EQ(t.engine->result(waiting).tokens.size(), 2u);
    o.prefill_chunk = -1;
    EXPECT_THROW(test::make_engine(model_path, o), UsageError);
}

TEST(Submit, RefusesWhatCannotRun) {
    MINFER_REQUIRE_FIXTURE(model_path, kModel);
    auto t = test::make_engine(model_path, options(512));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    EXPECT_THROW(t.engine->submit(greedy({}, 1)), UsageError);
    EXPECT_THROW(t.engine->submit(greedy({1, n_vocab}, 1)), UsageError);
    EXPECT_THROW(t.engine->submit(greedy({-1}, 1)), UsageError);
    EXPECT_THROW(t.engine->submit(greedy(random_tokens(129, 1, n_vocab), 1)), LimitError);
    SequenceParams bad = greedy({1, 2}, 1);
    bad.sampling.temperature = -1.0f;
    EXPECT_THROW(t.engine->submit(bad), UsageError);
    EXPECT_FALSE(t.engine->busy());
}

}  // namespace
}  // namespace minfer
