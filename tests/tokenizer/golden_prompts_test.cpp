// The reference prompts of ../shared/fixtures/golden: llama.cpp's prompt_tokens (BOS as the model
// asks, special-token text parsed) and its generated text, decoded one token at a time.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "core/file_io.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer_test_util.h"

namespace minfer::test {
namespace {

class GoldenFile : public ::testing::TestWithParam<std::string> {};

nlohmann::json read_golden(const std::filesystem::path& path) {
    return nlohmann::json::parse(read_file(path));
}

TEST_P(GoldenFile, PromptTokensReproduced) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + GetParam() + ".json");
    const nlohmann::json golden = read_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden["model"].get<std::string>());
    const Tokenizer tok = load_tokenizer(model_path);
    EXPECT_EQ(tok.n_vocab(), golden["n_vocab"].get<int32_t>());
    int cases = 0;
    for (const auto& c : golden["cases"]) {
        const std::string prompt = c["prompt"].get<std::string>();
        const auto expected = c["prompt_tokens"].get<std::vector<int32_t>>();
        EXPECT_EQ(tok.tokenize(prompt, true, true), expected) << "prompt: " << prompt;
        ++cases;
    }
    EXPECT_GT(cases, 0);
}

// generated_text is the concatenation of the generated pieces with invalid UTF-8 shown as
// U+FFFD: exactly what the streaming decoder hands out.
TEST_P(GoldenFile, GeneratedTextMatchesStreamingDecoder) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + GetParam() + ".json");
    const nlohmann::json golden = read_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden["model"].get<std::string>());
    const Tokenizer tok = load_tokenizer(model_path);
    for (const auto& c : golden["cases"]) {
        StreamingDecoder decoder(tok);
        std::string text;
        for (int32_t id : c["generated_tokens"].get<std::vector<int32_t>>()) {
            const std::string part = decoder.feed(id);
            EXPECT_EQ(sanitize_utf8(part), part) << "the decoder handed out invalid UTF-8";
            text += part;
        }
        text += decoder.finish();
        EXPECT_EQ(text, c["generated_text"].get<std::string>()) << "prompt: " << c["prompt"];
    }
}

INSTANTIATE_TEST_SUITE_P(
    Models, GoldenFile,
    ::testing::Values("stories260K", "tiny-llama-f16", "tiny-llama-q4_0", "tiny-llama-q4_k_m",
                      "tiny-llama-q8_0", "tiny-qwen2-f16", "tiny-qwen2-q4_k_m", "tiny-qwen2-q8_0",
                      "tiny-qwen3-q8_0", "tiny-gemma2-f16", "tiny-gemma2-q8_0", "tiny-gemma3-f16",
                      "tiny-gemma3-q8_0", "tiny-phi3-f16", "tiny-phi3-q8_0", "tiny-mixtral-f16",
                      "tiny-mixtral-q8_0", "tiny-qwen3moe-f16", "tiny-qwen3moe-q8_0"),
    [](const auto& param_info) {
        std::string name = param_info.param;
        for (char& ch : name) {
            if (ch == '-') ch = '_';
        }
        return name;
    });

}  // namespace
}  // namespace minfer::test
