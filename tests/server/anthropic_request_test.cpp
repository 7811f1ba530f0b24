// Anthropic's /v1/messages bodies translated into the conversation the chat templates take:
// system prompts, text blocks, tool_use and tool_result blocks, prefills, tools and tool_choice,
// thinking; and every refusal a 400 naming the field.

#include "server/anthropic_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

SamplingParams defaults() {
    SamplingParams s;
    s.temperature = 0.5f;
    return s;
}

GenerationRequest parse(const std::string& body) {
    return parse_messages_request(body, defaults());
}

// The param of the 400 a body gets (empty when it parses).
std::string refused_param(const std::string& body) {
    try {
        parse(body);
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        return e.param().empty() ? "(none)" : e.param();
    }
    return "";
}

TEST(AnthropicRequest, ReadsTheFieldsAndKeepsTheServersDefaults) {
    const GenerationRequest r = parse(R"({
        "model": "claude-x", "max_tokens": 64, "stream": true, "top_p": 0.9, "top_k": 5,
        "stop_sequences": ["END", ""], "metadata": {"user_id": "u"},
        "messages": [{"role": "user", "content": "Hi"}]})");
    EXPECT_EQ(r.model, "claude-x");
    EXPECT_EQ(r.max_tokens, 64);
    EXPECT_TRUE(r.stream);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);  // the server's
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 5);
    EXPECT_EQ(r.stop, std::vector<std::string>{"END"});  // empty ones dropped
    EXPECT_EQ(r.n, 1);
    EXPECT_EQ(r.chat().messages, Json::parse(R"([{"role": "user", "content": "Hi"}])"));
    EXPECT_EQ(r.chat().tool_choice.kind, ToolChoice::Kind::None);  // no tools
    EXPECT_EQ(r.chat().prefill, "");
}

TEST(AnthropicRequest, BlocksBecomeTheMessagesTemplatesTake) {
    const GenerationRequest r = parse(R"({"max_tokens": 9,
        "system": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        "messages": [
          {"role": "user", "content": [{"type": "text", "text": "Weather?"},
                                       {"type": "text", "text": "In Paris."}]},
          {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "hmm", "signature": "s"},
             {"type": "text", "text": "Let me look."},
             {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
          {"role": "user", "content": [
             {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
             {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
              "content": [{"type": "text", "text": "timeout"}]},
             {"type": "text", "text": "Thanks"}]},
          {"role": "assistant", "content": "Sure,"}]})");
    const Json expected = Json::parse(R"([
        {"role": "system", "content": "Be brief.\nBe kind."},
        {"role": "user", "content": "Weather?\nIn Paris."},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Error: timeout"},
        {"role": "user", "content": "Thanks"}])");
    EXPECT_EQ(r.chat().messages, expected) << r.chat().messages.dump(2);
    // The last assistant message is the answer's start.
    EXPECT_EQ(r.chat().prefill, "Sure,");
}

TEST(AnthropicRequest, ToolsToolChoiceAndThinking) {
    const std::string tools =
        R"("tools": [{"name": "add", "description": "Adds",
                      "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}}},
                     {"name": "get_weather", "input_schema": {"type": "object"}}])";
    const auto with = [&](const std::string& more) {
        return parse(concat(R"({"max_tokens": 9, "messages": [{"role": "user", "content": "x"}], )",
                            tools, more, "}"));
    };
    const GenerationRequest autod = with("");
    EXPECT_EQ(autod.chat().tool_choice.kind, ToolChoice::Kind::Auto);
    EXPECT_TRUE(autod.chat().parallel_tool_calls);
    EXPECT_EQ(autod.chat().tools[0]["type"], "function");
    EXPECT_EQ(autod.chat().tools[0]["function"]["name"], "add");
    EXPECT_EQ(autod.chat().tools[0]["function"]["description"], "Adds");
    EXPECT_EQ(autod.chat().tools[0]["function"]["parameters"]["properties"]["a"]["type"],
              "integer");
    const GenerationRequest any =
        with(R"(, "tool_choice": {"type": "any", "disable_parallel_tool_use": true})");
    EXPECT_EQ(any.chat().tool_choice.kind, ToolChoice::Kind::Required);
    EXPECT_FALSE(any.chat().parallel_tool_calls);
    EXPECT_EQ(any.chat().template_kwargs["tool_choice"], "required");
    const GenerationRequest named = with(R"(, "tool_choice": {"type": "tool", "name": "add"})");
    EXPECT_EQ(named.chat().tool_choice.kind, ToolChoice::Kind::Named);
    EXPECT_EQ(named.chat().tool_choice.name, "add");
    EXPECT_EQ(with(R"(, "tool_choice": {"type": "none"})").chat().tool_choice.kind,
              ToolChoice::Kind::None);
    EXPECT_EQ(with(R"(, "thinking": {"type": "enabled", "budget_tokens": 2048})")
                  .chat()
                  .template_kwargs["enable_thinking"],
              true);
    EXPECT_EQ(
        with(R"(, "thinking": {"type": "disabled"})").chat().template_kwargs["enable_thinking"],
        false);
    // count_tokens takes the body without max_tokens.
    EXPECT_NO_THROW(parse_messages_request(R"({"messages": [{"role": "user", "content": "x"}]})",
                                           defaults(), /*count_only=*/true));
}

TEST(AnthropicRequest, EveryBadFieldIsA400NamingIt) {
    const std::string m = R"("messages": [{"role": "user", "content": "x"}])";
    const auto body = [&](const std::string& fields) {
        return concat(R"({"max_tokens": 5, )", m, fields.empty() ? "" : ", ", fields, "}");
    };
    EXPECT_EQ(refused_param(body("")), "");
    EXPECT_EQ(refused_param("{"), "(none)");
    EXPECT_EQ(refused_param(concat("{", m, "}")), "max_tokens");
    EXPECT_EQ(refused_param(R"({"max_tokens": 0, )" + m + "}"), "max_tokens");
    EXPECT_EQ(refused_param(R"({"max_tokens": "5", )" + m + "}"), "max_tokens");
    EXPECT_EQ(refused_param(R"({"max_tokens": 5})"), "messages");
    EXPECT_EQ(refused_param(R"({"max_tokens": 5, "messages": []})"), "messages");
    EXPECT_EQ(
        refused_param(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})"),
        "messages[0].role");
    EXPECT_EQ(refused_param(R"({"max_tokens": 5, "messages": [{"role": "user", "content": 3}]})"),
              "messages[0].content");
    EXPECT_EQ(refused_param(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [
                 {"type": "image", "source": {}}]}]})"),
              "messages[0].content[0]");
    EXPECT_EQ(refused_param(R"({"max_tokens": 5, "messages": [{"role": "user", "content": [
                 {"type": "tool_result", "content": "x"}]}]})"),
              "messages[0].content[0]");
    EXPECT_EQ(refused_param(R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [
                 {"type": "tool_use", "id": "t", "name": "f", "input": [1]}]}]})"),
              "messages[0].content[0]");
    EXPECT_EQ(refused_param(body(R"("temperature": 1.5)")), "temperature");
    EXPECT_EQ(refused_param(body(R"("top_p": 0)")), "top_p");
    EXPECT_EQ(refused_param(body(R"("top_k": -1)")), "top_k");
    EXPECT_EQ(refused_param(body(R"("stop_sequences": "x")")), "stop_sequences");
    EXPECT_EQ(refused_param(body(R"("stop_sequences": [1])")), "stop_sequences");
    EXPECT_EQ(refused_param(body(R"("system": 3)")), "system");
    EXPECT_EQ(refused_param(body(R"("metadata": "x")")), "metadata");
    EXPECT_EQ(refused_param(body(R"("tools": {})")), "tools");
    EXPECT_EQ(refused_param(body(R"("tools": [{"name": "f"}])")), "tools");
    EXPECT_EQ(refused_param(body(R"("tools": [{"name": "bad name", "input_schema": {}}])")),
              "tools");
    EXPECT_EQ(refused_param(body(R"("tools": [{"type": "bash_20250124", "name": "bash"}])")),
              "tools");
    EXPECT_EQ(refused_param(body(R"("tool_choice": {"type": "any"})")), "tool_choice");
    EXPECT_EQ(refused_param(body(R"("tool_choice": "auto")")), "tool_choice");
    EXPECT_EQ(refused_param(body(R"("tool_choice": {"type": "sometimes"})")), "tool_choice");
    EXPECT_EQ(refused_param(body(R"("thinking": {"type": "enabled", "budget_tokens": 0})")),
              "budget_tokens");
    EXPECT_EQ(refused_param(body(R"("thinking": true)")), "thinking");
}

}  // namespace
}  // namespace minfer::server
