// `minfer run`, `chat` and `info` on the families of issue 16, end to end through the binary: the
// golden prompt's greedy continuation from the command line (up to the first position where the
// reference itself is undecided), a scripted chat, and what info/bench report of the model.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/fixtures.h"
#include "common/golden.h"

namespace minfer {
namespace {

using test::run_minfer;

class FamilyCommands : public testing::TestWithParam<std::string> {};

TEST_P(FamilyCommands, RunContinuesTheGoldenPromptAsTheReference) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + GetParam() + ".json");
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model, "models/" + golden.model);
    // The case whose continuation goes longest before the reference's first close call.
    const double tol = golden.tolerance();
    const test::GoldenCase* best = nullptr;
    std::size_t decided = 0;
    for (const test::GoldenCase& c : golden.cases) {
        std::size_t n = 0;
        while (n < c.generated_tokens.size() &&
               c.positions[c.prompt_tokens.size() - 1 + n].margin() > 2 * tol)
            ++n;
        if (best == nullptr || n > decided) best = &c, decided = n;
    }
    ASSERT_GE(decided, 4u);
    const test::GoldenCase& c = *best;
    std::ostringstream ids;
    for (std::size_t i = 0; i < c.prompt_tokens.size(); ++i)
        ids << (i ? "," : "") << c.prompt_tokens[i];
    const auto r = run_minfer({"run", model.string(), "--tokens", ids.str(), "--temp", "0", "-n",
                               std::to_string(decided), "--json", "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    const auto tokens = doc["tokens"].get<std::vector<int32_t>>();
    // All of them, unless the reference itself ends earlier with an end-of-generation token.
    if (doc["stop_reason"] == "eog") {
        ASSERT_FALSE(tokens.empty());
        ASSERT_LE(tokens.size(), decided);
    } else {
        EXPECT_EQ(doc["stop_reason"], "length");
        ASSERT_EQ(tokens.size(), decided);
    }
    for (std::size_t i = 0; i < tokens.size(); ++i)
        EXPECT_EQ(tokens[i], c.generated_tokens[i]) << i;
}

TEST_P(FamilyCommands, ScriptedChatAnswersEachLine) {
    MINFER_REQUIRE_FIXTURE(model, "models/" + GetParam() + ".gguf");
    const auto r =
        run_minfer({"chat", model.string(), "-n", "4", "--temp", "0", "-t", "2", "--ctx", "256"},
                   "Hello\nAnd then?\n");
    EXPECT_EQ(r.exit_code, 0) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyCommands,
                         testing::Values("tiny-gemma2-f16", "tiny-gemma3-f16", "tiny-phi3-f16",
                                         "tiny-mixtral-f16", "tiny-qwen3moe-f16"),
                         [](const testing::TestParamInfo<std::string>& p) {
                             return test::golden_name(p.param + ".json");
                         });

// info shows the expert tensors in 3-D; bench's roofline counts the used experts only.
TEST(FamilyCommands, BenchCountsTheUsedExpertsOnly) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-mixtral-q8_0.gguf");
    const auto info = run_minfer({"info", model.string()});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("[256, 256, 4]"), std::string::npos);
    const auto bench =
        run_minfer({"bench", model.string(), "-p", "16", "-n", "4", "-r", "1", "-t", "1"});
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    // Of the 4.3 MiB of weights, the 12 expert tensors (4 x 256 x 256 q8_0 values each) count
    // half (2 of 4 experts) and the embedding table one row: 2.67 MB = 2.5 MiB per token.
    EXPECT_NE(bench.out.find("Decode roofline: 2.5 MB of weights read per forward pass"),
              std::string::npos)
        << bench.out;
}

}  // namespace
}  // namespace minfer
