// Parsing the API's request bodies: defaults, every field's type and range, content parts,
// prompts, and the errors' status and param.

#include "server/openai_request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace minfer::server {
namespace {

SamplingParams defaults() {
    SamplingParams s;
    s.temperature = 0.5f;
    s.top_k = 7;
    return s;
}

// The param of the 400 a body gets (empty when it parses).
std::string refused_param(const std::string& body, bool chat = true) {
    try {
        if (chat)
            parse_chat_request(body, defaults());
        else
            parse_completion_request(body, defaults());
    } catch (const ApiError& e) {
        EXPECT_EQ(e.status(), 400) << body;
        return e.param().empty() ? "(none)" : e.param();
    }
    return "";
}

TEST(OpenAiRequest, FieldsLeftOutTakeTheServersDefaults) {
    const GenerationRequest r =
        parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})", defaults());
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
    EXPECT_EQ(r.sampling.top_k, 7);
    EXPECT_EQ(r.max_tokens, -1);
    EXPECT_EQ(r.n, 1);
    EXPECT_FALSE(r.stream);
    EXPECT_EQ(r.logprobs, -1);
    EXPECT_FALSE(r.seed_given);
    EXPECT_TRUE(r.chat().tools.is_null());
}

TEST(OpenAiRequest, ReadsEveryField) {
    const GenerationRequest r = parse_chat_request(R"({
        "model": "gpt-4o", "messages": [{"role": "system", "content": "be brief"},
                                        {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                     {"type": "text", "text": "b"}]}],
        "temperature": 0, "top_p": 0.9, "top_k": 3, "min_p": 0.1, "presence_penalty": 0.5,
        "frequency_penalty": -0.5, "repeat_penalty": 1.1, "seed": 42, "stop": ["x", "", "y"],
        "n": 2, "stream": true, "stream_options": {"include_usage": true}, "max_completion_tokens": 9,
        "max_tokens": 3, "logprobs": true, "top_logprobs": 4, "logit_bias": {"5": 2, "6": -100},
        "ignore_eos": true, "tools": [{"type": "function", "function": {"name": "f"}}],
        "tool_choice": "auto",
        "chat_template_kwargs": {"enable_thinking": false}, "some_unknown_field": [1, 2]})",
                                                   defaults());
    EXPECT_EQ(r.model, "gpt-4o");
    EXPECT_EQ(r.chat().messages[1]["content"], "a\nb");
    EXPECT_EQ(r.sampling.temperature, 0.0f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
    EXPECT_EQ(r.sampling.top_k, 3);
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_TRUE(r.seed_given);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(r.n, 2);
    EXPECT_TRUE(r.stream && r.include_usage && r.ignore_eos);
    EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins
    EXPECT_EQ(r.logprobs, 4);
    EXPECT_FLOAT_EQ(r.sampling.logit_bias.at(5), 2.0f);
    EXPECT_TRUE(std::isinf(r.sampling.logit_bias.at(6)));  // -100 bans
    EXPECT_EQ(r.chat().tools.size(), 1u);
    EXPECT_EQ(r.chat().template_kwargs["tool_choice"], "auto");
    EXPECT_EQ(r.chat().template_kwargs["enable_thinking"], false);
}

TEST(OpenAiRequest, EveryBadFieldIsA400NamingIt) {
    const std::string m = R"("messages":[{"role":"user","content":"hi"}])";
    EXPECT_EQ(refused_param("{"), "(none)");
    EXPECT_EQ(refused_param("[1]"), "(none)");
    EXPECT_EQ(refused_param("{}"), "messages");
    EXPECT_EQ(refused_param(R"({"messages":[]})"), "messages");
    EXPECT_EQ(refused_param(R"({"messages":[5]})"), "messages[0]");
    EXPECT_EQ(refused_param(R"({"messages":[{"content":"x"}]})"), "messages[0].role");
    EXPECT_EQ(refused_param(R"({"messages":[{"role":"user","content":7}]})"),
              "messages[0].content");
    EXPECT_EQ(refused_param(R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})"),
              "messages[0].content[0]");
    for (const char* field : {R"("temperature":"hot")",
                              R"("temperature":-1)",
                              R"("top_p":0)",
                              R"("top_p":2)",
                              R"("top_k":-1)",
                              R"("top_k":1.5)",
                              R"("n":0)",
                              R"("n":9)",
                              R"("max_tokens":-2)",
                              R"("max_tokens":0)",
                              R"("max_tokens":"9")",
                              R"("stream":1)",
                              R"("stop":5)",
                              R"("stop":[1])",
                              R"("logit_bias":[1])",
                              R"("logit_bias":{"x":1})",
                              R"("logit_bias":{"1":"a"})",
                              R"("top_logprobs":3)",
                              R"("seed":"x")",
                              R"("tools":{})",
                              R"("stream_options":true)",
                              R"("response_format":{"type":"xml"})",
                              R"("chat_template_kwargs":[])"}) {
        const std::string body = concat("{", m, ",", field, "}");
        EXPECT_NE(refused_param(body), "") << body;
    }
    // Deep nesting is refused while parsing.
    EXPECT_EQ(refused_param(std::string(100, '[') + std::string(100, ']')), "(none)");
    // A number beyond double's range (found by fuzz/http_request.cpp).
    EXPECT_EQ(refused_param(R"({"messages":[], "n": 6e6666})"), "(none)");
    // Invalid UTF-8 is malformed JSON.
    EXPECT_EQ(refused_param("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}"), "(none)");
}

TEST(OpenAiRequest, CompletionPrompts) {
    EXPECT_EQ(
        *std::get<PromptInput>(parse_completion_request(R"({"prompt":"hi"})", defaults()).input)
             .text,
        "hi");
    EXPECT_EQ(
        *std::get<PromptInput>(parse_completion_request(R"({"prompt":["hi"]})", defaults()).input)
             .text,
        "hi");
    EXPECT_EQ(std::get<PromptInput>(
                  parse_completion_request(R"({"prompt":[1,2,3],"logprobs":5})", defaults()).input)
                  .tokens,
              (std::vector<int32_t>{1, 2, 3}));
    EXPECT_EQ(refused_param(R"({"prompt":["a","b"]})", false), "prompt");
    EXPECT_EQ(refused_param(R"({"prompt":[[1],[2]]})", false), "prompt");
    EXPECT_EQ(refused_param(R"({"prompt":[-1]})", false), "prompt");
    EXPECT_EQ(refused_param(R"({"prompt":[]})", false), "prompt");
    EXPECT_EQ(refused_param(R"({})", false), "prompt");
    EXPECT_EQ(refused_param(R"({"prompt":"a","logprobs":6})", false), "logprobs");
    EXPECT_EQ(refused_param(R"({"prompt":"a","echo":true})", false), "echo");
}

}  // namespace
}  // namespace minfer::server

namespace minfer::server {
namespace {

std::string chat_with(const std::string& fields) {
    return R"({"messages":[{"role":"user","content":"hi"}],)" + fields + "}";
}

const char* kTools = R"("tools":[{"type":"function","function":{"name":"f","parameters":
    {"type":"object","properties":{"x":{"type":"integer"}}}}},
    {"type":"function","function":{"name":"g"}}])";

TEST(OpenAiRequest, ResponseFormatsAndGrammars) {
    EXPECT_FALSE(parse_chat_request(chat_with(R"("response_format":{"type":"text"})"), defaults())
                     .constraint);
    const GenerationRequest object =
        parse_chat_request(chat_with(R"("response_format":{"type":"json_object"})"), defaults());
    ASSERT_TRUE(object.constraint);
    EXPECT_EQ(object.constraint_field, "response_format");
    const GenerationRequest schema = parse_chat_request(
        chat_with(R"("response_format":{"type":"json_schema","json_schema":{"name":"n",
            "strict":true,"schema":{"type":"integer","minimum":3,"maximum":5}}})"),
        defaults());
    ASSERT_TRUE(schema.constraint);
    EXPECT_NE(schema.constraint->to_gbnf().find("[3-5]"), std::string::npos);
    const GenerationRequest grammar =
        parse_chat_request(chat_with(R"("grammar":"root ::= \"a\"")"), defaults());
    EXPECT_EQ(grammar.constraint_field, "grammar");
    EXPECT_TRUE(parse_completion_request(R"({"prompt":"x","grammar":"root ::= [0-9]"})", defaults())
                    .constraint);
    // Refused, naming the field.
    EXPECT_EQ(refused_param(chat_with(R"("response_format":{"type":"yaml"})")), "response_format");
    EXPECT_EQ(refused_param(chat_with(R"("response_format":{"type":"json_schema"})")),
              "response_format");
    EXPECT_EQ(
        refused_param(chat_with(
            R"("response_format":{"type":"json_schema","json_schema":{"schema":{"not":{}}}})")),
        "response_format");
    EXPECT_EQ(refused_param(chat_with(R"("grammar":"root ::= ")")), "");  // an empty root is fine
    EXPECT_EQ(refused_param(chat_with(R"("grammar":"root = x")")), "grammar");
    EXPECT_EQ(refused_param(chat_with(R"("grammar":5)")), "grammar");
    EXPECT_EQ(refused_param(chat_with(
                  R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"})")),
              "grammar");
}

TEST(OpenAiRequest, ToolsAndToolChoice) {
    const GenerationRequest autod = parse_chat_request(chat_with(kTools), defaults());
    EXPECT_EQ(autod.chat().tool_choice.kind, ToolChoice::Kind::Auto);
    EXPECT_TRUE(autod.chat().parallel_tool_calls);
    const GenerationRequest named = parse_chat_request(
        chat_with(
            std::string(kTools) +
            R"(,"tool_choice":{"type":"function","function":{"name":"g"}},"parallel_tool_calls":false)"),
        defaults());
    EXPECT_EQ(named.chat().tool_choice.kind, ToolChoice::Kind::Named);
    EXPECT_EQ(named.chat().tool_choice.name, "g");
    EXPECT_FALSE(named.chat().parallel_tool_calls);
    EXPECT_EQ(
        parse_chat_request(chat_with(std::string(kTools) + R"(,"tool_choice":"none")"), defaults())
            .chat()
            .tool_choice.kind,
        ToolChoice::Kind::None);
    EXPECT_EQ(parse_chat_request(chat_with(R"("tool_choice":"none")"), defaults())
                  .chat()
                  .tool_choice.kind,
              ToolChoice::Kind::None);
    // Refused, naming the field.
    EXPECT_EQ(refused_param(chat_with(R"("tools":{})")), "tools");
    EXPECT_EQ(refused_param(chat_with(R"("tools":[{"type":"code"}])")), "tools");
    EXPECT_EQ(
        refused_param(chat_with(R"("tools":[{"type":"function","function":{"name":"a b"}}])")),
        "tools");
    EXPECT_EQ(
        refused_param(chat_with(
            R"("tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}])")),
        "tools");
    EXPECT_EQ(refused_param(chat_with(
                  R"("tools":[{"type":"function","function":{"name":"a","parameters":[]}}])")),
              "tools");
    EXPECT_EQ(refused_param(chat_with(std::string(kTools) + R"(,"tool_choice":"sometimes")")),
              "tool_choice");
    EXPECT_EQ(
        refused_param(chat_with(std::string(kTools) +
                                R"(,"tool_choice":{"type":"function","function":{"name":"h"}})")),
        "tool_choice");
    EXPECT_EQ(refused_param(chat_with(R"("tool_choice":"required")")), "tool_choice");
    EXPECT_EQ(refused_param(chat_with(std::string(kTools) + R"(,"parallel_tool_calls":"yes")")),
              "parallel_tool_calls");
    EXPECT_EQ(refused_param(
                  chat_with(std::string(kTools) + R"(,"response_format":{"type":"json_object"})")),
              "response_format");
}

}  // namespace
}  // namespace minfer::server
