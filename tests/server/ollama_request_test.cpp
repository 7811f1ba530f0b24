// ollama's /api/chat and /api/generate bodies translated into a GenerationRequest: options, the
// conversation (tool calls with arguments as objects), prompts with and without the template,
// format, think; and every refusal a 400 naming the field.

#include "server/ollama_request.h"

#include <gtest/gtest.h>

#include <limits>

#include "server/api_error.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

SamplingParams defaults() {
    SamplingParams s;
    s.temperature = 0.5f;
    return s;
}

std::string refused_param(const std::string& body, bool chat = true) {
    try {
        chat ? parse_ollama_chat(body, defaults()) : parse_ollama_generate(body, defaults());
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        return e.param().empty() ? "(none)" : e.param();
    }
    return "";
}

TEST(OllamaRequest, OptionsMapToSamplingAndStreamingIsTheDefault) {
    const GenerationRequest r = parse_ollama_chat(R"({"model": "llama3.2",
        "messages": [{"role": "user", "content": "Hi"}],
        "options": {"temperature": 0.2, "top_k": 5, "top_p": 0.9, "min_p": 0.1, "seed": 42,
                    "num_predict": 30, "stop": ["END", ""], "repeat_penalty": 1.1,
                    "num_ctx": 8192, "num_thread": 4, "mirostat": 0},
        "keep_alive": "5m"})",
                                                  defaults());
    EXPECT_EQ(r.model, "llama3.2");
    EXPECT_TRUE(r.stream);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.2f);
    EXPECT_EQ(r.sampling.top_k, 5);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_TRUE(r.seed_given);
    EXPECT_EQ(r.max_tokens, 30);
    EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
    EXPECT_FLOAT_EQ(r.sampling.repeat_penalty, 1.1f);
    // -1 and -2: until the end or a full context.
    for (const char* n : {"-1", "-2"}) {
        const auto body =
            concat(R"({"model": "m", "messages": [], "options": {"num_predict": )", n, "}}");
        EXPECT_EQ(parse_ollama_chat(body, defaults()).max_tokens,
                  std::numeric_limits<int64_t>::max());
    }
    const GenerationRequest plain =
        parse_ollama_chat(R"({"model": "m", "messages": [], "stream": false})", defaults());
    EXPECT_FALSE(plain.stream);
    EXPECT_FLOAT_EQ(plain.sampling.temperature, 0.5f);  // the server's
    EXPECT_EQ(plain.max_tokens, -1);
}

TEST(OllamaRequest, MessagesToolCallsFormatAndThink) {
    const GenerationRequest r = parse_ollama_chat(R"({"model": "m",
        "messages": [
          {"role": "system", "content": "Be brief."},
          {"role": "user", "content": "Weather?", "images": []},
          {"role": "assistant", "content": "", "thinking": "hmm",
           "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
          {"role": "tool", "content": "18C", "tool_name": "get_weather"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
                   "parameters": {"type": "object"}}}],
        "think": "high"})",
                                                  defaults());
    const Json expected = Json::parse(R"([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
           "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}],
         "reasoning_content": "hmm"},
        {"role": "tool", "content": "18C", "tool_name": "get_weather"}])");
    EXPECT_EQ(r.chat().messages, expected) << r.chat().messages.dump(2);
    EXPECT_EQ(r.chat().tool_choice.kind, ToolChoice::Kind::Auto);
    EXPECT_EQ(r.chat().template_kwargs["enable_thinking"], true);
    EXPECT_FALSE(r.constraint);

    const GenerationRequest json =
        parse_ollama_chat(R"({"model": "m", "messages": [], "format": "json"})", defaults());
    ASSERT_TRUE(json.constraint);
    EXPECT_EQ(json.constraint_field, "format");
    const GenerationRequest schema = parse_ollama_chat(
        R"({"model": "m", "messages": [], "format": {"type": "object",
            "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 5}}}, "think": false})",
        defaults());
    ASSERT_TRUE(schema.constraint);
    EXPECT_EQ(schema.chat().template_kwargs["enable_thinking"], false);
}

TEST(OllamaRequest, GenerateTemplatesThePromptUnlessRaw) {
    const GenerationRequest r = parse_ollama_generate(
        R"({"model": "m", "prompt": "Why?", "system": "Be brief."})", defaults());
    EXPECT_EQ(r.chat().messages, Json::parse(R"([{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "Why?"}])"));
    EXPECT_EQ(r.chat().tool_choice.kind, ToolChoice::Kind::None);
    const GenerationRequest raw =
        parse_ollama_generate(R"({"model": "m", "prompt": "Why?", "raw": true})", defaults());
    EXPECT_EQ(std::get<PromptInput>(raw.input).text, "Why?");
    // No prompt: ollama's way to load the model (no messages).
    EXPECT_TRUE(parse_ollama_generate(R"({"model": "m"})", defaults()).chat().messages.empty());
}

TEST(OllamaRequest, EveryBadFieldIsA400NamingIt) {
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": []})"), "");
    EXPECT_EQ(refused_param("{"), "(none)");
    EXPECT_EQ(refused_param(R"({"messages": []})"), "model");
    EXPECT_EQ(refused_param(R"({"model": "", "messages": []})"), "model");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": {}})"), "messages");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [{"role": "bot", "content": "x"}]})"),
              "messages[0].role");
    EXPECT_EQ(
        refused_param(
            R"({"model": "m", "messages": [{"role": "user", "content": "x", "images": ["A"]}]})"),
        "messages[0].images");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [{"role": "assistant",
                  "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}]})"),
              "messages[0].tool_calls");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "stream": "yes"})"), "stream");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "options": []})"), "options");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "options": {"temperature": "hot"}})"),
              "temperature");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "options": {"num_predict": -3}})"),
              "num_predict");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "options": {"stop": "x"}})"),
              "options.stop");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "options": {"num_ctx": "big"}})"),
              "num_ctx");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "format": "yaml"})"), "format");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "format": 3})"), "format");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "think": "very"})"), "think");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "keep_alive": []})"), "keep_alive");
    EXPECT_EQ(refused_param(R"({"model": "m", "messages": [], "format": "json", "tools": [
                  {"type": "function", "function": {"name": "f"}}]})"),
              "format");
    EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "x", "images": ["A"]})", false), "images");
    EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "x", "suffix": "y"})", false), "suffix");
    EXPECT_EQ(refused_param(R"({"model": "m", "prompt": "x", "template": "{{ .Prompt }}"})", false),
              "template");
}

}  // namespace
}  // namespace minfer::server
