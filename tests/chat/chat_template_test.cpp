// The chat-formatting API: template choice (model, override file, ChatML), special-token text,
// inputs seen by the template, and `minfer template` end to end on the fixture models.

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "common/fixtures.h"
#include "core/file_io.h"
#include "gguf/gguf_file.h"

namespace minfer::chat {
namespace {

GgufMetadata vocab_metadata() {
    GgufMetadata meta("test.gguf");
    meta.set("tokenizer.ggml.tokens",
             GgufValue::array(GgufArray::of_strings({"<unk>", "<s>", "</s>"})));
    meta.set("tokenizer.ggml.bos_token_id", GgufValue::of<uint32_t>(1));
    meta.set("tokenizer.ggml.eos_token_id", GgufValue::of<int32_t>(2));
    return meta;
}

ChatInputs user_message(const std::string& text) {
    ChatInputs in;
    in.messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", text}}});
    return in;
}

TEST(ChatTemplate, ChatMlWhenTheModelHasNoTemplate) {
    const GgufMetadata meta = vocab_metadata();
    EXPECT_EQ(template_source_for(meta, std::nullopt), kChatMlTemplate);
    ChatInputs in;
    in.messages = nlohmann::ordered_json::parse(
        R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
    EXPECT_EQ(ChatTemplate::parse(std::string(kChatMlTemplate)).render(in),
              "<|im_start|>system\nBe "
              "brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    in.add_generation_prompt = false;
    EXPECT_EQ(ChatTemplate::parse(std::string(kChatMlTemplate)).render(in),
              "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, ModelTemplateAndOverrideFile) {
    GgufMetadata meta = vocab_metadata();
    meta.set("tokenizer.chat_template",
             GgufValue::string("{{ bos_token }}{{ messages[0].content }}"));
    EXPECT_EQ(template_source_for(meta, std::nullopt), "{{ bos_token }}{{ messages[0].content }}");
    test::TempDir dir;
    std::ofstream(dir / "t.jinja", std::ios::binary) << "override {{ eos_token }}\n";
    EXPECT_EQ(template_source_for(meta, dir / "t.jinja"), "override {{ eos_token }}\n");
    EXPECT_THROW(template_source_for(meta, dir / "missing.jinja"), IoError);
}

TEST(ChatTemplate, SpecialTokenText) {
    GgufMetadata meta = vocab_metadata();
    EXPECT_EQ(special_token_text(meta, "tokenizer.ggml.bos_token_id"), "<s>");
    EXPECT_EQ(special_token_text(meta, "tokenizer.ggml.eos_token_id"), "</s>");
    EXPECT_EQ(special_token_text(meta, "tokenizer.ggml.padding_token_id"), "");
    meta.set("tokenizer.ggml.eos_token_id", GgufValue::of<uint32_t>(3));
    EXPECT_THROW(special_token_text(meta, "tokenizer.ggml.eos_token_id"), FormatError);
    meta.remove("tokenizer.ggml.tokens");
    EXPECT_THROW(special_token_text(meta, "tokenizer.ggml.bos_token_id"), FormatError);
}

TEST(ChatTemplate, InputsTheTemplateSees) {
    const auto t = ChatTemplate::parse(
        "{{ bos_token }}|{{ eos_token }}|{{ tools is defined }}|{{ add_generation_prompt }}|"
        "{{ messages|length }}|{{ enable_thinking }}|{{ strftime_now('%Y-%m-%d %H:%M') }}");
    ChatInputs in = user_message("x");
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.now = std::chrono::system_clock::from_time_t(1721989800);
    in.extra_context = {{"enable_thinking", false}};
    EXPECT_EQ(t.render(in), "<s>|</s>|False|True|1|False|2024-07-26 10:30");
    in.tools = nlohmann::ordered_json::array();
    in.add_generation_prompt = false;
    EXPECT_EQ(t.render(in).substr(0, 18), "<s>|</s>|True|Fals");
    in.extra_context = nlohmann::ordered_json::array();
    EXPECT_THROW(t.render(in), FormatError);
}

TEST(ChatTemplate, ErrorsSayChatTemplateAndWhere) {
    try {
        ChatTemplate::parse("{% if %}");
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_EQ(
            std::string(e.what()),
            "chat template line 1, column 7: expected an expression, got 'end of statement block'");
    }
    try {
        ChatTemplate::parse("\n{{ raise_exception('no system role') }}").render(user_message("x"));
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), "chat template line 2, column 1: no system role");
    }
}

TEST(ChatTemplate, Qwen3EnableThinkingFromExtraContext) {
    MINFER_REQUIRE_FIXTURE(renders_path, "templates/renders.json");
    const auto renders = nlohmann::ordered_json::parse(read_file(renders_path));
    const auto t =
        ChatTemplate::parse(read_file(renders_path.parent_path() / "Qwen-Qwen3-0.6B.jinja"));
    ChatInputs in;
    in.messages = renders["cases"]["system_user"]["messages"];
    in.extra_context = {{"enable_thinking", false}};
    // The template appends an empty think block after the generation prompt.
    EXPECT_EQ(
        t.render(in),
        renders["templates"]["Qwen-Qwen3-0.6B.jinja"]["system_user"]["output"].get<std::string>() +
            "<think>\n\n</think>\n\n");
}

// ---- `minfer template` ----

struct RenderCase {
    nlohmann::ordered_json spec;
    std::string expected;
};

class TemplateCommand : public ::testing::Test {
  protected:
    void SetUp() override {
        renders_path_ = test::fixture_path("templates/renders.json");
        if (!std::filesystem::exists(renders_path_)) {
            if (test::in_ci()) FAIL() << "fixture missing in CI: " << renders_path_;
            GTEST_SKIP() << "fixture missing: " << renders_path_;
        }
        renders_ = nlohmann::ordered_json::parse(read_file(renders_path_));
    }

    // The case's messages and tools written to files, as command-line arguments.
    std::vector<std::string> case_args(const std::string& case_name) {
        const auto& c = renders_["cases"][case_name];
        std::ofstream(dir_ / "messages.json") << c["messages"].dump();
        std::vector<std::string> args = {"--messages", (dir_ / "messages.json").string()};
        if (c.contains("tools")) {
            std::ofstream(dir_ / "tools.json") << c["tools"].dump();
            args.insert(args.end(), {"--tools", (dir_ / "tools.json").string()});
        }
        if (!c["add_generation_prompt"].get<bool>()) args.push_back("--no-generation-prompt");
        return args;
    }

    std::string expected(const std::string& template_name, const std::string& case_name) {
        return renders_["templates"][template_name][case_name]["output"].get<std::string>();
    }

    std::filesystem::path renders_path_;
    nlohmann::ordered_json renders_;
    test::TempDir dir_;
};

TEST_F(TemplateCommand, Qwen2ModelPrintsItsPromptExactly) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    for (const char* case_name :
         {"system_user", "multi_turn", "no_system_no_prompt", "unicode", "tools"}) {
        SCOPED_TRACE(case_name);
        std::vector<std::string> args = {"template", model.string()};
        const auto extra = case_args(case_name);
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = test::run_minfer(args);
        EXPECT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(r.out, expected("Qwen-Qwen2.5-7B-Instruct.jinja", case_name));
    }
}

TEST_F(TemplateCommand, Qwen3ModelWithUserAndSystemFlags) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen3-q8_0.gguf");
    const auto r = test::run_minfer({"template", model.string(), "--system",
                                     "You are a helpful assistant.", "--user", "Hello!"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, expected("Qwen-Qwen3-0.6B.jinja", "system_user"));
}

TEST_F(TemplateCommand, TemplateOverrideAndClock) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-f16.gguf");
    const auto override_path =
        renders_path_.parent_path() / "meta-llama-Llama-3.2-3B-Instruct.jinja";
    std::vector<std::string> args = {"template",   model.string(),
                                     "--template", override_path.string(),
                                     "--now",      "2024-07-26T10:30:00"};
    const auto extra = case_args("system_user");
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = test::run_minfer(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // The fixture renders with bos_token "<BOS>"; this model's BOS token is "<s>".
    std::string want = expected("meta-llama-Llama-3.2-3B-Instruct.jinja", "system_user");
    ASSERT_EQ(want.rfind("<BOS>", 0), 0u);
    want.replace(0, 5, "<s>");
    EXPECT_EQ(r.out, want);
}

TEST_F(TemplateCommand, ChatMlForAModelWithoutTemplate) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto r =
        test::run_minfer({"template", model.string(), "--user", "Hi", "--no-generation-prompt"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "<|im_start|>user\nHi<|im_end|>\n");
}

TEST_F(TemplateCommand, ErrorsAreOneLineWithTheirExitCode) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-f16.gguf");
    auto r = test::run_minfer({"template", model.string()});
    EXPECT_EQ(r.exit_code, 2);  // a usage error
    EXPECT_EQ(r.err, "minfer: error: give --messages FILE or --user TEXT\n");

    std::ofstream(dir_ / "bad.json") << "[{\"role\": ";
    r = test::run_minfer({"template", model.string(), "--messages", (dir_ / "bad.json").string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is not valid JSON"), std::string::npos) << r.err;

    const auto gemma = renders_path_.parent_path() / "google-gemma-2-2b-it.jinja";
    r = test::run_minfer(
        {"template", model.string(), "--template", gemma.string(), "--system", "s", "--user", "u"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "minfer: error: chat template line 1, column 56: System role not supported\n");

    r = test::run_minfer({"template", model.string(), "--user", "u", "--now", "yesterday"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--now 'yesterday'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace minfer::chat
