// Tool calls: the format each real template teaches, and calls rendered by that template into an
// assistant turn parsed back to the same calls, whole and streamed in pieces of every size.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "common/fixtures.h"
#include "core/file_io.h"

namespace minfer::chat {
namespace {

using Json = nlohmann::ordered_json;

struct TemplateCase {
    const char* file;
    ToolCallFormat format;
    bool arguments_as_string;   // the template concatenates them (functionary, DeepSeek)
    bool parallel;              // renders several calls in one turn
    bool content_null = false;  // renders the calls only when the content is null
};

// (llama.cpp's own deepseek-r1 template cannot render tools in Python either: its tojson of a
// generator raises, as renders.json records.)
const TemplateCase kTemplates[] = {
    {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::Hermes, false, true},
    {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::Hermes, false, true},
    {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::Hermes, false, true},
    {"NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja", ToolCallFormat::Hermes, false, true},
    {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::Llama3, false, false},
    {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolCallFormat::Llama3, false, false},
    {"meta-llama-Llama-3.3-70B-Instruct.jinja", ToolCallFormat::Llama3, false, false},
    {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::Mistral, false, true},
    {"meetkai-functionary-medium-v3.1.jinja", ToolCallFormat::FunctionaryV31, true, true},
    {"meetkai-functionary-medium-v3.2.jinja", ToolCallFormat::FunctionaryV32, true, true},
    {"fireworks-ai-llama-3-firefunction-v2.jinja", ToolCallFormat::FireFunction, true, true},
    {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolCallFormat::CommandR7b, false,
     true},
    {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallFormat::DeepSeekR1, true, true,
     true},
};

Json weather_tools() {
    return Json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
          "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
        "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}}}])");
}

// The assistant turn a template renders for `calls`: the conversation with the turn, less the
// conversation before it.
std::string rendered_turn(const ChatTemplate& t, const TemplateCase& c, const Json& calls) {
    Json messages =
        Json::array({{{"role", "system"}, {"content", "You can call tools."}},
                     {{"role", "user"}, {"content", "Weather in Paris, time in Tokyo?"}}});
    ChatInputs before;
    before.messages = messages;
    before.tools = weather_tools();
    before.bos_token = "<BOS>";
    before.eos_token = "<EOS>";
    // What firefunction's template reads instead of `tools` (runtime/prompt.cpp provides them).
    before.extra_context = {{"functions", weather_tools().dump()}, {"datetime", "Jul 26 2024"}};
    Json tool_calls = Json::array();
    for (std::size_t i = 0; i < calls.size(); ++i) {
        Json args = calls[i]["arguments"];
        tool_calls.push_back(
            {{"id", c.format == ToolCallFormat::Mistral ? "abcDEF12" + std::to_string(i)
                                                        : "call_" + std::to_string(i)},
             {"type", "function"},
             {"function",
              {{"name", calls[i]["name"]},
               {"arguments", c.arguments_as_string ? Json(args.dump()) : args}}}});
    }
    ChatInputs with = before;
    with.add_generation_prompt = false;
    with.messages.push_back({{"role", "assistant"},
                             {"content", c.content_null ? Json() : Json("")},
                             {"tool_calls", tool_calls}});
    const std::string full = t.render(with);
    // The turn starts after the last assistant header.
    std::size_t common = std::string::npos;
    for (const std::string header :
         {"<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n", "[/INST]",
          "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<｜Assistant｜>"}) {
        // (firefunction's template adds a generation prompt even when told not to: not that one.)
        std::size_t at = full.rfind(header);
        if (at != std::string::npos && at + header.size() == full.size() && at > 0)
            at = full.rfind(header, at - 1);
        if (at != std::string::npos && (common == std::string::npos || at + header.size() > common))
            common = at + header.size();
    }
    if (common == std::string::npos) return full;
    std::string turn = full.substr(common);
    if (const auto next = turn.find("<|start_header_id|>"); next != std::string::npos)
        turn.erase(next);
    // The end-of-turn token is not part of a generated answer's text.
    for (const std::string end : {"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "</s>", "<EOS>",
                                  "<|END_OF_TURN_TOKEN|>", "<｜end▁of▁sentence｜>"}) {
        while (!turn.empty() && (turn.back() == '\n' || turn.back() == ' ')) turn.pop_back();
        if (turn.size() >= end.size() &&
            turn.compare(turn.size() - end.size(), end.size(), end) == 0)
            turn.erase(turn.size() - end.size());
    }
    return turn;
}

TEST(ToolCalls, EachTemplateIsDetectedAndItsCallsParseBack) {
    const Json calls =
        Json::parse(R"([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
                                        {"name": "get_time", "arguments": {"zone": "Asia/Tokyo"}}])");
    for (const TemplateCase& c : kTemplates) {
        SCOPED_TRACE(c.file);
        MINFER_REQUIRE_FIXTURE(path, std::string("templates/") + c.file);
        const std::string source = read_file(path);
        EXPECT_EQ(detect_tool_call_format(source), c.format)
            << tool_call_format_name(detect_tool_call_format(source));
        const ChatTemplate t = ChatTemplate::parse(source);
        const Json expected = c.parallel ? calls : Json::array({calls[0]});
        const std::string turn = rendered_turn(t, c, expected);
        const ParsedAnswer parsed = parse_tool_calls(c.format, turn);
        ASSERT_EQ(parsed.calls.size(), expected.size()) << turn;
        for (std::size_t i = 0; i < expected.size(); ++i) {
            EXPECT_EQ(parsed.calls[i].name, expected[i]["name"].get<std::string>()) << turn;
            EXPECT_EQ(Json::parse(parsed.calls[i].arguments), expected[i]["arguments"]) << turn;
        }
        // Streamed in pieces of every size: the same calls, and no text lost.
        for (std::size_t piece = 1; piece <= 7; ++piece) {
            ToolCallStream stream(c.format);
            std::string content;
            std::vector<ToolCall> streamed;
            for (std::size_t at = 0; at < turn.size(); at += piece) {
                ParsedAnswer p = stream.push(std::string_view(turn).substr(at, piece));
                content += p.content;
                streamed.insert(streamed.end(), p.calls.begin(), p.calls.end());
            }
            ParsedAnswer p = stream.finish();
            content += p.content;
            streamed.insert(streamed.end(), p.calls.begin(), p.calls.end());
            ASSERT_EQ(streamed.size(), expected.size()) << "piece " << piece << ": " << turn;
            EXPECT_EQ(streamed[0].name, expected[0]["name"].get<std::string>());
        }
    }
}

TEST(ToolCalls, TextStaysContent) {
    for (const ToolCallFormat f :
         {ToolCallFormat::Hermes, ToolCallFormat::Llama3, ToolCallFormat::Mistral,
          ToolCallFormat::Generic, ToolCallFormat::FunctionaryV31}) {
        SCOPED_TRACE(tool_call_format_name(f));
        const std::string text = "The weather is {fine} <tool today";
        EXPECT_EQ(parse_tool_calls(f, text).content, text);
        ToolCallStream stream(f);
        std::string out = stream.push(text).content;
        out += stream.finish().content;
        EXPECT_EQ(out, text);
    }
}

TEST(ToolCalls, MalformedCallsStayContent) {
    const std::string broken =
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ";
    EXPECT_EQ(parse_tool_calls(ToolCallFormat::Hermes, broken).content, broken);
    ToolCallStream stream(ToolCallFormat::Hermes);
    std::string out = stream.push("Sure. " + broken).content;
    EXPECT_EQ(out, "Sure. ");
    out += stream.finish().content;
    EXPECT_EQ(out, "Sure. " + broken);
}

TEST(ToolCalls, ContentAroundHermesCalls) {
    const ParsedAnswer p = parse_tool_calls(
        ToolCallFormat::Hermes,
        "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
        "<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"y\\\": 2}\"}\n</tool_call>");
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.content, "Let me check.");
    EXPECT_EQ(p.calls[1].name, "b");
    EXPECT_EQ(p.calls[1].arguments, "{\"y\":2}");
}

TEST(ToolCalls, GenericJson) {
    EXPECT_EQ(parse_tool_calls(ToolCallFormat::Generic,
                               R"({"tool_calls": [{"name": "f", "arguments": {"a": [1]}}]})")
                  .calls[0]
                  .arguments,
              R"({"a":[1]})");
    EXPECT_EQ(parse_tool_calls(ToolCallFormat::Generic, R"( {"content": "hello"} )").content,
              "hello");
}

TEST(ToolCalls, Ids) {
    const std::string mistral = new_tool_call_id(ToolCallFormat::Mistral);
    EXPECT_EQ(mistral.size(), 9u);
    EXPECT_EQ(
        mistral.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"),
        std::string::npos);
    EXPECT_EQ(new_tool_call_id(ToolCallFormat::Hermes).substr(0, 5), "call_");
    EXPECT_NE(new_tool_call_id(ToolCallFormat::Hermes), new_tool_call_id(ToolCallFormat::Hermes));
}

}  // namespace
}  // namespace minfer::chat
