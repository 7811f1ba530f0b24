// Chat on the new families: a family's chat template renders turns in its own special tokens,
// which the tokenizer turns into single ids, and the end-of-turn token ends a generation (what
// `minfer run` / `chat` / `serve` do with a prompt, through the same library calls). The fixture
// models carry no template and, for Gemma, a vocabulary without its turn tokens: the tests give
// them the published templates (../shared/fixtures/templates) and, for Gemma, the two tokens.

#include <gtest/gtest.h>

#include <cstring>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "core/file_io.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "runtime/generation.h"
#include "runtime/prompt.h"

namespace minfer {
namespace {

// A copy of a fixture model with its metadata changed.
void write_copy(const std::filesystem::path& in, const std::filesystem::path& out,
                const std::function<void(GgufMetadata&)>& change) {
    const GgufFile file = GgufFile::open(in);
    GgufWriter w;
    for (const auto& e : file.metadata().entries()) w.metadata().set(e.key, e.value);
    change(w.metadata());
    for (const TensorInfo* t : file.tensors()) {
        std::vector<int64_t> shape(t->ne.begin(), t->ne.begin() + t->n_dims);
        w.add_tensor(t->name, t->type, shape, [t](std::span<std::byte> bytes) {
            std::memcpy(bytes.data(), t->data.data(), bytes.size());
        });
    }
    w.write_file(out);
}

nlohmann::ordered_json user_says(const std::string& text) {
    return nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}});
}

int count(const std::vector<int32_t>& tokens, int32_t id) {
    return static_cast<int>(std::count(tokens.begin(), tokens.end(), id));
}

// Greedy generation from `prompt` with `token` made the most likely: it must end the answer at
// once, as an end of generation, with no text.
void expect_ends_at(const LoadedModel& m, const std::vector<int32_t>& prompt, int32_t token) {
    EngineOptions options;
    options.n_threads = 2;
    options.n_ctx = 256;
    Engine engine(m.model, m.tokenizer, options);
    SequenceParams p;
    p.prompt = prompt;
    p.sampling.temperature = 0.0f;
    p.sampling.logit_bias[token] = 100.0f;
    p.n_predict = 8;
    const Generation g = generate(engine, std::move(p), nullptr);
    EXPECT_EQ(g.result.stop, StopReason::EndOfGeneration);
    EXPECT_TRUE(g.result.tokens.empty());
    EXPECT_EQ(g.result.text, "");
}

// Phi-3: the fixture's vocabulary has <|end|> (512), <|endoftext|> (513), <|assistant|> (514),
// <|user|> (515), <|system|> (516).
TEST(FamilyChat, Phi3TurnsAreItsSpecialTokensAndEndAtEnd) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-phi3-q8_0.gguf");
    MINFER_REQUIRE_FIXTURE(template_path, "templates/microsoft-Phi-3.5-mini-instruct.jinja");
    test::TempDir dir;
    write_copy(model_path, dir / "phi3.gguf", [&](GgufMetadata& m) {
        m.set("tokenizer.chat_template", GgufValue::string(read_file(template_path)));
    });
    const LoadedModel m = load_model((dir / "phi3.gguf").string());
    ASSERT_TRUE(m.has_template);
    const std::vector<int32_t> prompt = chat_prompt_tokens(m, user_says("Hello"));
    EXPECT_EQ(render_chat_prompt(m, user_says("Hello")), "<|user|>\nHello<|end|>\n<|assistant|>\n");
    EXPECT_EQ(prompt.front(), 1);  // BOS, once
    EXPECT_EQ(count(prompt, 1), 1);
    EXPECT_EQ(count(prompt, 515), 1);
    EXPECT_EQ(count(prompt, 512), 1);
    EXPECT_EQ(count(prompt, 514), 1);
    EXPECT_TRUE(m.tokenizer->is_eog(512));
    EXPECT_TRUE(m.tokenizer->is_eog(513));
    EXPECT_FALSE(m.tokenizer->is_eog(514));
    expect_ends_at(m, prompt, 512);
}

// Gemma: tokens 510 and 511 of the fixture's vocabulary become <start_of_turn> and <end_of_turn>
// (control tokens, as Gemma's own vocabulary has them); the template writes {{ bos_token }}, and
// the prompt still holds one BOS.
TEST(FamilyChat, GemmaTurnsAreItsSpecialTokensAndEndAtEndOfTurn) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-gemma2-q8_0.gguf");
    MINFER_REQUIRE_FIXTURE(template_path, "templates/google-gemma-2-2b-it.jinja");
    test::TempDir dir;
    write_copy(model_path, dir / "gemma.gguf", [&](GgufMetadata& m) {
        const GgufArray& tokens = m.get_array("tokenizer.ggml.tokens");
        std::vector<std::string> texts(tokens.strings().begin(), tokens.strings().end());
        auto types = m.find("tokenizer.ggml.token_type")->as_array().to_vector<int32_t>();
        texts[510] = "<start_of_turn>";
        texts[511] = "<end_of_turn>";
        types[510] = types[511] = 3;  // control
        m.set("tokenizer.ggml.tokens", GgufValue::array(GgufArray::of_strings(std::move(texts))));
        m.set("tokenizer.ggml.token_type", GgufValue::array(GgufArray::of(types)));
        m.set("tokenizer.chat_template", GgufValue::string(read_file(template_path)));
    });
    const LoadedModel m = load_model((dir / "gemma.gguf").string());
    EXPECT_EQ(render_chat_prompt(m, user_says("Hello")),
              "<s><start_of_turn>user\nHello<end_of_turn>\n<start_of_turn>model\n");
    const std::vector<int32_t> prompt = chat_prompt_tokens(m, user_says("Hello"));
    EXPECT_EQ(prompt.front(), 1);
    EXPECT_EQ(count(prompt, 1), 1);
    EXPECT_EQ(count(prompt, 510), 2);
    EXPECT_EQ(count(prompt, 511), 1);
    EXPECT_TRUE(m.tokenizer->is_eog(511));
    EXPECT_FALSE(m.tokenizer->is_eog(510));
    expect_ends_at(m, prompt, 511);
    // Gemma's template refuses a system message, as Hugging Face's does.
    const auto with_system = nlohmann::ordered_json::array(
        {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hello"}}});
    EXPECT_THROW(render_chat_prompt(m, with_system), Error);
}

// Qwen3-MoE's fixture carries a ChatML template, but its 2048-token vocabulary has no
// <|im_start|>: the markers are plain text there, and the model still answers.
TEST(FamilyChat, Qwen3MoeFixtureTemplateRendersAndRuns) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-qwen3moe-q8_0.gguf");
    const LoadedModel m = load_model(model_path.string());
    ASSERT_TRUE(m.has_template);
    const std::vector<int32_t> prompt = chat_prompt_tokens(m, user_says("Hello"));
    EXPECT_GT(prompt.size(), 10u);
    EngineOptions options;
    options.n_threads = 2;
    options.n_ctx = 256;
    Engine engine(m.model, m.tokenizer, options);
    SequenceParams p;
    p.prompt = prompt;
    p.sampling.temperature = 0.0f;
    p.n_predict = 4;
    p.ignore_eog = true;
    const Generation g = generate(engine, std::move(p), nullptr);
    EXPECT_EQ(g.result.tokens.size(), 4u);
    EXPECT_EQ(g.result.stop, StopReason::MaxTokens);
}

}  // namespace
}  // namespace minfer
