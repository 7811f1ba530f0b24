// `minfer run` and `minfer score` end to end, through the built binary.

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/fixtures.h"
#include "common/golden.h"

namespace minfer {
namespace {

using test::run_minfer;

int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(RunCommand, StoriesGreedyFromBosWritesTheGoldenStory) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/stories260K.json");
    std::string golden_text;
    for (const auto& c : test::load_golden(golden_path).cases) {
        if (c.prompt.empty()) golden_text = c.generated_text;
    }
    ASSERT_FALSE(golden_text.empty());
    const auto r =
        run_minfer({"run", model.string(), "--raw", "-p", "", "--temp", "0", "-n", "40"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // 40 of the golden 64 tokens: the output is a prefix of the golden text, past its first
    // sentences.
    std::string out = r.out;
    ASSERT_FALSE(out.empty());
    ASSERT_EQ(out.back(), '\n');
    out.pop_back();
    EXPECT_EQ(golden_text.compare(0, out.size(), out), 0) << "got: " << out;
    EXPECT_NE(out.find(" Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park."),
              std::string::npos)
        << out;
    EXPECT_NE(r.err.find("minfer: generation"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("40 tokens"), std::string::npos) << r.err;
}

TEST(RunCommand, JsonResult) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto r = run_minfer({"run", model.string(), "--raw", "-p", "Once upon a time", "--temp",
                               "0", "-n", "8", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["tokens"].size(), 8u);
    EXPECT_EQ(doc["stop_reason"], "length");
    EXPECT_EQ(doc["prompt_tokens"], 5);  // BOS + 4 (golden prompt_tokens of this prompt)
    EXPECT_GT(doc["timings"]["predicted_per_second"].get<double>(), 0.0);
    EXPECT_FALSE(doc["text"].get<std::string>().empty());
}

TEST(RunCommand, TokenIdsInTokenIdsOut) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/stories260K.json");
    const auto golden = test::load_golden(golden_path);
    const auto& c = golden.cases.front();
    std::string ids;
    for (int32_t t : c.prompt_tokens) ids += (ids.empty() ? "" : ",") + std::to_string(t);
    const auto r = run_minfer({"run", model.string(), "--tokens", ids, "-n", "10", "--temp", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string expected;
    for (int i = 0; i < 10; ++i)
        expected +=
            (i ? "," : "") + std::to_string(c.generated_tokens[static_cast<std::size_t>(i)]);
    EXPECT_EQ(r.out, expected + "\n");
}

TEST(RunCommand, StopStringEndsTheAnswerBeforeIt) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto r = run_minfer({"run", model.string(), "--raw", "-p", "", "--temp", "0", "-n", "60",
                               "--stop", "Lily", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["stop_reason"], "stop");
    EXPECT_EQ(doc["text"], " Once upon a time, there was a little girl named ");
}

TEST(RunCommand, SameSeedSameText) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const std::vector<std::string> args = {"run", model.string(), "--raw",  "-p", "Once",
                                           "-n",  "30",           "--seed", "7",  "--json"};
    const auto a = run_minfer(args), b = run_minfer(args);
    ASSERT_EQ(a.exit_code, 0) << a.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["tokens"], nlohmann::json::parse(b.out)["tokens"]);
}

TEST(RunCommand, ChatTemplateIsAppliedUnlessRaw) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    const auto templated =
        run_minfer({"run", model.string(), "-p", "Hi", "-n", "1", "--temp", "0", "--json"});
    const auto raw = run_minfer(
        {"run", model.string(), "-p", "Hi", "-n", "1", "--temp", "0", "--json", "--raw"});
    ASSERT_EQ(templated.exit_code, 0) << templated.err;
    ASSERT_EQ(raw.exit_code, 0) << raw.err;
    // "<|im_start|>system\n...<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    // vs "Hi".
    const int templated_tokens = nlohmann::json::parse(templated.out)["prompt_tokens"].get<int>();
    const int raw_tokens = nlohmann::json::parse(raw.out)["prompt_tokens"].get<int>();
    EXPECT_GT(templated_tokens, raw_tokens + 10);
    EXPECT_LE(raw_tokens, 2);
}

TEST(RunCommand, BadInputsGiveOneErrorLine) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    test::TempDir dir;
    std::ofstream(dir / "not-a-model.gguf") << "hello, world\n";
    const std::string long_prompt(4000, 'a');
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"run", model.string(), "-p", "x", "--bogus-flag"}, "bogus"},
        {{"run", (dir / "missing.gguf").string(), "-p", "x"}, "no such file"},
        {{"run", (dir / "not-a-model.gguf").string(), "-p", "x"}, "not a GGUF file"},
        {{"run", model.string(), "-p", "x", "-n", "-5"}, "--n-predict"},
        {{"run", model.string(), "-p", "x", "--ctx", "0"}, "--ctx"},
        {{"run", model.string(), "-p", long_prompt, "--ctx", "64"},
         "does not fit the context of 64"},
        {{"run", model.string()}, "give a prompt"},
        {{"run", model.string(), "-p", "x", "--top-p", "0"}, "--top-p"},
        {{"run", model.string(), "--tokens", "1,x"}, "'x' is not a token id"},
        {{"run", model.string(), "--tokens", "1,99999"}, "out of range"},
        // Malformed references are refused before any request (tests/hub has the rest).
        {{"run", "hf:no-owner", "-p", "x"}, "expected hf:OWNER/REPO"},
        {{"run", "ollama:a/b/c", "-p", "x"}, "is not a model name"},
        {{"run", "hf:o/r/../../x.gguf", "-p", "x"}, "not a file path"},
    };
    for (const auto& [args, needle] : cases) {
        const auto r = run_minfer(args);
        EXPECT_NE(r.exit_code, 0) << args.back();
        std::string errors;  // the error line, without the status and warning lines
        std::istringstream lines(r.err);
        for (std::string line; std::getline(lines, line);) {
            if (line.rfind("minfer: error:", 0) == 0) errors += line + "\n";
        }
        EXPECT_EQ(count_lines(errors), 1) << r.err;
        EXPECT_NE(errors.find(needle), std::string::npos)
            << "expected '" << needle << "' in: " << r.err;
    }
}

TEST(ScoreCommand, JsonLikeTheGoldenFiles) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/tiny-llama-q4_0.json");
    const auto golden = test::load_golden(golden_path);
    const auto& c = golden.cases.front();
    const auto r =
        run_minfer({"score", model.string(), "--prompt", c.prompt, "--json", "--top", "10"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["n_vocab"], golden.n_vocab);
    EXPECT_EQ(doc["prompt_tokens"].get<std::vector<int32_t>>(), c.prompt_tokens);
    ASSERT_EQ(doc["positions"].size(), c.prompt_tokens.size());
    for (std::size_t i = 0; i < c.prompt_tokens.size(); ++i) {
        const auto& ours = doc["positions"][i];
        EXPECT_EQ(ours["top"].size(), 10u);
        EXPECT_NEAR(ours["logsumexp"].get<double>(), c.positions[i].logsumexp, golden.tolerance());
        if (c.positions[i].margin() > 2 * golden.tolerance()) {
            EXPECT_EQ(ours["top"][0][0].get<int32_t>(), c.positions[i].top[0].first);
        }
    }
}

TEST(ScoreCommand, DumpGraphListsTheOperations) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen3-q8_0.gguf");
    const auto r = run_minfer({"score", model.string(), "--tokens", "1,2,3", "--dump-graph"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("blk.0.attn_q_norm"), std::string::npos);
    EXPECT_NE(r.out.find("blk.3.ffn_down"), std::string::npos);
    EXPECT_NE(r.out.find("q8_0"), std::string::npos);
    EXPECT_NE(r.out.find("output"), std::string::npos);
    // Every op carries its parameters: the graph is all a backend needs.
    EXPECT_NE(r.out.find("eps=1e-06"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("neox head_dim=64 n_dims=64 base=1e+06"), std::string::npos);
    EXPECT_NE(r.out.find("heads=8/4 dk=64 dv=64 scale=0.125"), std::string::npos);
    EXPECT_NE(r.out.find("buffers: residual[3, 256]"), std::string::npos);
}

TEST(ScoreCommand, TraceTimesEveryOperation) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-f16.gguf");
    const auto r =
        run_minfer({"score", model.string(), "--tokens", "1,2,3"}, "", {{"MINFER_TRACE", "1"}});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("trace: blk.0.attn_q"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(" us"), std::string::npos);
    // A matmul's line names its matrix's type and size and the rate it was read at.
    const std::size_t q = r.err.find("trace: blk.0.attn_q ");
    ASSERT_NE(q, std::string::npos) << r.err;
    const std::string line = r.err.substr(q, r.err.find('\n', q) - q);
    EXPECT_NE(line.find("  f16 "), std::string::npos) << line;
    EXPECT_NE(line.find(" MB "), std::string::npos) << line;
    EXPECT_NE(line.find(" GB/s"), std::string::npos) << line;
}

}  // namespace
}  // namespace minfer
