// Many sequences in one batch: each gets the logits it gets alone. Sixteen sequences with prompts
// of different lengths arrive in three waves, so the engine's batches mix prompt chunks of some
// with decode steps of others at every position, and prompts are prefilled in chunks of the
// batch budget instead of in one piece. In batch-invariant mode every logits row must have the
// same bits as the sequence's run alone (one prompt chunk, nobody beside it); with
// --no-batch-invariant the rows agree within a small tolerance (the one-row and many-row matmul
// paths sum in other orders). On every fixture model, with the weights repacked (the default)
// and in the file's layout (--no-repack).

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <random>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "common/golden.h"
#include "runtime/generation.h"

namespace minfer {
namespace {

constexpr int kSequences = 16;
constexpr int64_t kCtx = 96;

// What one sequence produced: its greedy tokens and every logits row, by position.
struct Trace {
    std::vector<int32_t> tokens;
    std::map<int64_t, std::vector<float>> rows;
};

// Sequence i: a random prompt of 1 + 5i tokens (1 .. 76), greedy, 8 + i % 5 tokens.
SequenceParams sequence_params(int i, int32_t n_vocab, Trace& trace) {
    std::mt19937 rng(1234u + static_cast<unsigned>(i));
    std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
    SequenceParams p;
    p.prompt.resize(static_cast<std::size_t>(1 + 5 * i));
    for (auto& t : p.prompt) t = token(rng);
    p.sampling.temperature = 0.0f;
    p.n_predict = 8 + i % 5;
    p.ignore_eog = true;
    p.on_logits = [&trace](int64_t pos, std::span<const float> row) {
        trace.rows[pos].assign(row.begin(), row.end());
    };
    return p;
}

EngineOptions engine_options(bool invariant, bool repack, int64_t n_batch) {
    EngineOptions o;
    o.repack_weights = repack;
    o.n_threads = 2;
    o.n_ctx = kCtx;
    o.n_batch = n_batch;
    o.kv_tokens = kSequences * kCtx;
    o.batch_invariant = invariant;
    return o;
}

struct MixingParam {
    std::string model;
    bool invariant;
    bool repack;
};

class BatchMixing : public testing::TestWithParam<MixingParam> {};

TEST_P(BatchMixing, EverySequenceGetsTheLogitsItGetsAlone) {
    const MixingParam& param = GetParam();
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + param.model);

    // Alone: each sequence by itself, its prompt in one chunk.
    std::vector<Trace> alone(kSequences);
    {
        auto t = test::make_engine(model_path, engine_options(param.invariant, param.repack, 512));
        const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
        for (int i = 0; i < kSequences; ++i) {
            const Generation g =
                generate(*t.engine, sequence_params(i, n_vocab, alone[i]), nullptr);
            alone[i].tokens = g.result.tokens;
            t.engine->release(g.id);
        }
    }

    // Together: a batch budget of 40 tokens, sequences arriving in waves of 5, 6 and 5.
    std::vector<Trace> together(kSequences);
    auto t = test::make_engine(model_path, engine_options(param.invariant, param.repack, 40));
    const auto n_vocab = static_cast<int32_t>(t.model.model->hparams().n_vocab);
    std::vector<SeqId> ids;
    const auto submit_up_to = [&](int n) {
        while (static_cast<int>(ids.size()) < n) {
            const int i = static_cast<int>(ids.size());
            ids.push_back(t.engine->submit(sequence_params(i, n_vocab, together[i])));
        }
    };
    submit_up_to(5);
    int steps = 0, largest_batch_sequences = 0;
    while (t.engine->busy() || static_cast<int>(ids.size()) < kSequences) {
        if (steps == 2) submit_up_to(11);
        if (steps == 5) submit_up_to(kSequences);
        const std::vector<SequenceEvent> events = t.engine->step();
        int advanced = 0;
        for (const auto& e : events) advanced += e.token >= 0 ? 1 : 0;
        largest_batch_sequences = std::max(largest_batch_sequences, advanced);
        ++steps;
        ASSERT_LT(steps, 1000) << "the engine does not finish";
    }
    // The point of the test: many sequences really were sampled in the same step.
    EXPECT_GE(largest_batch_sequences, 8);

    // The fastest mode's rows may differ in their last bits, which the quantization of the
    // activations can amplify: within the golden tolerance of the model, as any other path.
    double tolerance = 0, worst = 0;
    if (!param.invariant) {
        MINFER_REQUIRE_FIXTURE(golden_path,
                               "golden/" + param.model.substr(0, param.model.size() - 5) + ".json");
        tolerance = test::load_golden(golden_path).tolerance();
    }
    for (int i = 0; i < kSequences; ++i) {
        SCOPED_TRACE("sequence " + std::to_string(i));
        const SequenceResult& r = t.engine->result(ids[static_cast<std::size_t>(i)]);
        together[i].tokens = r.tokens;
        ASSERT_FALSE(alone[i].rows.empty());
        if (param.invariant) {
            EXPECT_EQ(together[i].tokens, alone[i].tokens);
            ASSERT_EQ(together[i].rows.size(), alone[i].rows.size());
            for (const auto& [pos, row] : alone[i].rows) {
                const auto& other = together[i].rows[pos];
                ASSERT_EQ(other.size(), row.size());
                EXPECT_EQ(std::memcmp(other.data(), row.data(), row.size() * sizeof(float)), 0)
                    << "logits at position " << pos << " differ in their bits";
            }
        } else {
            // Rows are compared while both runs saw the same tokens (a near tie may be broken
            // differently, after which the continuations are different texts).
            const std::size_t prompt = 1 + 5 * static_cast<std::size_t>(i);
            std::size_t same = 0;
            while (same < alone[i].tokens.size() && same < together[i].tokens.size() &&
                   alone[i].tokens[same] == together[i].tokens[same])
                ++same;
            for (const auto& [pos, row] : alone[i].rows) {
                if (static_cast<std::size_t>(pos) >= prompt + same) break;
                const double d = test::max_logprob_difference(row, together[i].rows[pos]);
                worst = std::max(worst, d);
                EXPECT_LE(d, tolerance) << "position " << pos;
            }
        }
    }
    if (!param.invariant)
        std::printf("%s: max |dlogprob| %.4f (tolerance %.4f)\n", param.model.c_str(), worst,
                    tolerance);
}

std::vector<MixingParam> mixing_params() {
    std::vector<MixingParam> params;
    for (const auto& model : test::engine_fixture_models()) {
        for (bool repack : {true, false}) {
            params.push_back({model, true, repack});
            params.push_back({model, false, repack});
        }
    }
    return params;
}

std::string mixing_name(const testing::TestParamInfo<MixingParam>& info) {
    std::string name = info.param.model.substr(0, info.param.model.size() - 5);
    for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name + (info.param.invariant ? "_invariant" : "_fastest") +
           (info.param.repack ? "" : "_norepack");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchMixing, testing::ValuesIn(mixing_params()), mixing_name);

}  // namespace
}  // namespace minfer
