// The forward pass against llama.cpp's reference logits (../shared/fixtures/golden): every golden
// file, evaluated in one batch, one token at a time and in micro-batches of 7, with 1 and 2
// threads; greedy decoding reproduces the reference continuation.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "common/fixtures.h"
#include "common/golden.h"
#include "model/context.h"

namespace minfer {
namespace {

enum class Mode { OneBatch, TokenByToken, MicroBatch7 };

struct ParityParam {
    std::string golden;  // file name under fixtures/golden
    Mode mode;
    int threads;
};

// "tiny-llama-q4_0.json" -> "tiny_llama_q4_0"
std::string golden_name(const std::string& file) {
    std::string name = file.substr(0, file.size() - 5);
    std::replace_if(
        name.begin(), name.end(),
        [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
    return name;
}

std::string param_name(const testing::TestParamInfo<ParityParam>& info) {
    const std::string name = golden_name(info.param.golden);
    const char* mode = info.param.mode == Mode::OneBatch       ? "batch"
                       : info.param.mode == Mode::TokenByToken ? "bytoken"
                                                               : "micro7";
    return name + "_" + mode + "_t" + std::to_string(info.param.threads);
}

class Parity : public testing::TestWithParam<ParityParam> {};

TEST_P(Parity, LogprobsMatchTheReference) {
    const ParityParam& p = GetParam();
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + p.golden);
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    auto model = Model::load(model_path);
    ASSERT_EQ(model->hparams().n_vocab, golden.n_vocab);
    const double tol = golden.tolerance();

    double worst = 0;
    for (const auto& c : golden.cases) {
        const std::vector<int32_t> tokens = c.all_tokens();
        ContextOptions options;
        options.n_threads = p.threads;
        options.n_ctx = 512;
        options.n_batch = p.mode == Mode::MicroBatch7 ? 7 : 512;
        InferenceContext ctx(model, options);
        std::vector<std::vector<float>> logits(tokens.size());
        const auto keep = [&](std::size_t offset) {
            return [&logits, offset](int64_t i, std::span<const float> row) {
                logits[offset + static_cast<std::size_t>(i)].assign(row.begin(), row.end());
            };
        };
        if (p.mode == Mode::TokenByToken) {
            for (std::size_t i = 0; i < tokens.size(); ++i)
                ctx.evaluate(std::span(tokens).subspan(i, 1), true, keep(i));
        } else {
            ctx.evaluate(tokens, true, keep(0));
        }
        ASSERT_EQ(c.positions.size(), tokens.size());
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            const auto& ref = c.positions[i];
            const double dev = test::max_logprob_deviation(ref, logits[i]);
            worst = std::max(worst, dev);
            EXPECT_LE(dev, tol) << "position " << i << " of prompt '" << c.prompt << "'";
            if (ref.margin() > 2 * tol) {
                const auto ours =
                    std::max_element(logits[i].begin(), logits[i].end()) - logits[i].begin();
                EXPECT_EQ(ours, ref.top[0].first)
                    << "top-1 at position " << i << " of prompt '" << c.prompt << "'";
            }
        }
    }
    std::printf("parity %-24s max |dlogprob| %.4f (tolerance %.4f)\n", golden.model.c_str(), worst,
                tol);
}

std::vector<ParityParam> all_params() {
    const char* files[] = {
        "stories260K.json",     "tiny-llama-f16.json",    "tiny-llama-q8_0.json",
        "tiny-llama-q4_0.json", "tiny-llama-q4_k_m.json", "tiny-qwen2-f16.json",
        "tiny-qwen2-q8_0.json", "tiny-qwen2-q4_k_m.json", "tiny-qwen3-q8_0.json"};
    std::vector<ParityParam> params;
    for (const char* f : files) {
        for (Mode m : {Mode::OneBatch, Mode::TokenByToken, Mode::MicroBatch7}) {
            for (int threads : {1, 2}) params.push_back({f, m, threads});
        }
    }
    return params;
}

INSTANTIATE_TEST_SUITE_P(Golden, Parity, testing::ValuesIn(all_params()), param_name);

// Greedy decoding from the prompt reproduces the reference continuation up to the first position
// where the reference's own top-1/top-2 margin is inside the tolerance.
class GreedyParity : public testing::TestWithParam<std::string> {};

TEST_P(GreedyParity, ReproducesTheReferenceContinuation) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + GetParam());
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    auto model = Model::load(model_path);
    const double tol = golden.tolerance();
    for (const auto& c : golden.cases) {
        ContextOptions options;
        options.n_threads = 2;
        InferenceContext ctx(model, options);
        std::vector<float> logits = ctx.evaluate_last(c.prompt_tokens);
        for (std::size_t j = 0; j < c.generated_tokens.size(); ++j) {
            const auto& ref = c.positions[c.prompt_tokens.size() - 1 + j];
            if (ref.margin() < 2 * tol) break;  // the reference itself could go either way here
            const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) -
                                                   logits.begin());
            ASSERT_EQ(next, c.generated_tokens[j])
                << "token " << j << " of the continuation of '" << c.prompt << "'";
            const int32_t one[1] = {next};
            logits = ctx.evaluate_last(one);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Golden, GreedyParity,
    testing::Values("stories260K.json", "tiny-llama-f16.json", "tiny-llama-q8_0.json",
                    "tiny-llama-q4_0.json", "tiny-llama-q4_k_m.json", "tiny-qwen2-f16.json",
                    "tiny-qwen2-q8_0.json", "tiny-qwen2-q4_k_m.json", "tiny-qwen3-q8_0.json"),
    [](const testing::TestParamInfo<std::string>& p) { return golden_name(p.param); });

// The real trained model writes exactly the reference story from BOS.
TEST(StoriesParity, GreedyFromBosIsTheGoldenStory) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/stories260K.json");
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/stories260K.gguf");
    auto model = Model::load(model_path);
    const test::GoldenCase* from_bos = nullptr;
    for (const auto& c : golden.cases) {
        if (c.prompt.empty()) from_bos = &c;
    }
    ASSERT_NE(from_bos, nullptr);
    ASSERT_EQ(from_bos->prompt_tokens, std::vector<int32_t>{1});
    InferenceContext ctx(model, {});
    std::vector<float> logits = ctx.evaluate_last(from_bos->prompt_tokens);
    std::vector<int32_t> generated;
    while (generated.size() < from_bos->generated_tokens.size()) {
        const auto next =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        generated.push_back(next);
        const int32_t one[1] = {next};
        logits = ctx.evaluate_last(one);
    }
    EXPECT_EQ(generated, from_bos->generated_tokens);
}

}  // namespace
}  // namespace minfer
