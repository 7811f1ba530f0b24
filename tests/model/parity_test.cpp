// The forward pass against llama.cpp's reference logits (../shared/fixtures/golden): every golden
// file, evaluated in one batch, one token at a time and in micro-batches of 7, with 1 and 2
// threads, with every KV cache type and with the GEMV kernels (--no-batch-invariant), with the
// weights repacked (the default) and zero-copy in the file's layout (--no-repack); greedy
// decoding reproduces the reference continuation wherever the reference itself is decided.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "common/golden.h"
#include "common/golden_parity.h"
#include "runtime/generation.h"

namespace minfer {
namespace {

enum class Mode { OneBatch, TokenByToken, MicroBatch7 };

struct ParityParam {
    std::string golden;  // file name under fixtures/golden
    Mode mode;
    int threads;
    GgmlType kv_type = GgmlType::F16;
    bool batch_invariant = true;  // the engine's default
    bool repack = true;           // the engine's default
};

std::string param_name(const testing::TestParamInfo<ParityParam>& info) {
    const ParityParam& p = info.param;
    const char* mode = p.mode == Mode::OneBatch       ? "batch"
                       : p.mode == Mode::TokenByToken ? "bytoken"
                                                      : "micro7";
    std::string name = test::golden_name(p.golden) + "_" + mode + "_t" + std::to_string(p.threads);
    if (p.kv_type != GgmlType::F16) name += "_kv" + std::string(type_name(p.kv_type));
    if (!p.batch_invariant) name += "_gemv";
    if (!p.repack) name += "_norepack";
    return name;
}

class Parity : public testing::TestWithParam<ParityParam> {};

TEST_P(Parity, LogprobsMatchTheReference) {
    const ParityParam& p = GetParam();
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + p.golden);
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    EngineOptions options;
    options.n_threads = p.threads;
    options.n_ctx = 512;
    options.n_batch = p.mode == Mode::MicroBatch7 ? 7 : p.mode == Mode::TokenByToken ? 1 : 512;
    options.kv_type = p.kv_type;
    options.batch_invariant = p.batch_invariant;
    options.repack_weights = p.repack;
    auto t = test::make_engine(model_path, options);
    ASSERT_EQ(t.model.model->hparams().n_vocab, golden.n_vocab);
    // The golden files were made with an f16 cache: a q8_0 cache may deviate twice as far.
    const double tol = golden.tolerance() * (p.kv_type == GgmlType::Q8_0 ? 2.0 : 1.0);
    const test::ParityFigures f = test::check_golden_parity(*t.engine, golden, tol);
    std::printf("parity %-24s %-28s %s\n", golden.model.c_str(),
                testing::UnitTest::GetInstance()->current_test_info()->name(), f.summary().c_str());
}

std::vector<ParityParam> all_params() {
    std::vector<ParityParam> params;
    for (const std::string& f : test::kRunnableGoldenFiles) {
        for (Mode m : {Mode::OneBatch, Mode::TokenByToken, Mode::MicroBatch7}) {
            for (int threads : {1, 2}) params.push_back({f, m, threads});
        }
        params.push_back({f, Mode::MicroBatch7, 2, GgmlType::F32});
        // A q8_0 cache needs head sizes that are multiples of 32 (stories260K's are 8).
        if (std::string(f) != "stories260K.json")
            params.push_back({f, Mode::MicroBatch7, 2, GgmlType::Q8_0});
        // --no-batch-invariant: one token at a time is where the GEMV kernels run (on
        // weights of the file's layout: repacked ones take the GEMM's arithmetic in both modes).
        params.push_back({f, Mode::TokenByToken, 2, GgmlType::F16, /*batch_invariant=*/false});
        params.push_back({f, Mode::TokenByToken, 2, GgmlType::F16, false, /*repack=*/false});
        // --no-repack: the weights zero-copy in the file's layout.
        for (Mode m : {Mode::OneBatch, Mode::TokenByToken, Mode::MicroBatch7}) {
            params.push_back({f, m, 2, GgmlType::F16, true, /*repack=*/false});
        }
    }
    return params;
}

INSTANTIATE_TEST_SUITE_P(Golden, Parity, testing::ValuesIn(all_params()), param_name);

// Greedy decoding through the decode path (one token per forward pass after the prompt, the
// sequence continued token by token): at every position of the reference continuation where the
// reference's own top-1/top-2 margin exceeds twice the tolerance, our greedy token is the
// reference's. The reference tokens are fed whatever we picked, so a close call early on does
// not end the comparison.
class GreedyParity : public testing::TestWithParam<std::string> {};

TEST_P(GreedyParity, ReproducesTheReferenceContinuation) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + GetParam());
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    EngineOptions options;
    options.n_threads = 2;
    options.n_ctx = 512;
    auto t = test::make_engine(model_path, options);
    const double tol = golden.tolerance();
    int compared = 0, skipped = 0;
    for (const auto& c : golden.cases) {
        std::vector<int32_t> context = c.prompt_tokens;
        std::optional<SeqId> kept;
        for (std::size_t j = 0; j < c.generated_tokens.size(); ++j) {
            SequenceParams p;
            p.prompt = context;
            p.sampling.temperature = 0.0f;
            p.n_predict = 1;
            p.ignore_eog = true;
            p.keep = true;
            p.continue_from = kept;
            const Generation g = generate(*t.engine, std::move(p), nullptr);
            kept = g.id;
            ASSERT_EQ(g.result.tokens.size(), 1u);
            // Only the newest token was evaluated: the rest came from the continued sequence.
            if (j > 0) {
                EXPECT_EQ(g.result.stats.n_prompt, 1) << "token " << j;
            }
            const auto& ref = c.positions[c.prompt_tokens.size() - 1 + j];
            if (ref.margin() >= 2 * tol) {
                EXPECT_EQ(g.result.tokens[0], c.generated_tokens[j])
                    << "token " << j << " of the continuation of '" << c.prompt << "'";
                ++compared;
            } else {
                ++skipped;
            }
            context.push_back(c.generated_tokens[j]);
        }
        t.engine->release(*kept);
    }
    EXPECT_GT(compared, 0);
    std::printf("greedy %-24s %d tokens compared, %d close calls skipped\n", golden.model.c_str(),
                compared, skipped);
}

INSTANTIATE_TEST_SUITE_P(Golden, GreedyParity, testing::ValuesIn(test::kRunnableGoldenFiles),
                         [](const testing::TestParamInfo<std::string>& p) {
                             return test::golden_name(p.param);
                         });

// The real trained model writes exactly the reference story from BOS.
TEST(StoriesParity, GreedyFromBosIsTheGoldenStory) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/stories260K.json");
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/stories260K.gguf");
    const test::GoldenCase* from_bos = nullptr;
    for (const auto& c : golden.cases) {
        if (c.prompt.empty()) from_bos = &c;
    }
    ASSERT_NE(from_bos, nullptr);
    ASSERT_EQ(from_bos->prompt_tokens, std::vector<int32_t>{1});
    auto t = test::make_engine(model_path, {});
    SequenceParams p;
    p.prompt = from_bos->prompt_tokens;
    p.sampling.temperature = 0.0f;
    p.n_predict = static_cast<int64_t>(from_bos->generated_tokens.size());
    const Generation g = generate(*t.engine, std::move(p), nullptr);
    EXPECT_EQ(g.result.tokens, from_bos->generated_tokens);
}

}  // namespace
}  // namespace minfer
