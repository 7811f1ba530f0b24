// Tool-call grammars: random texts drawn from each format's grammar (required, a named tool,
// auto) parse back into calls of the offered tools whose arguments hold the required properties;
// auto also lets plain text through, and the trigger only as the start of calls.

#include <gtest/gtest.h>

#include <random>

#include "chat/tool_calls.h"
#include "core/error.h"
#include "grammar/compiled_grammar.h"
#include "runtime/tool_calling.h"

namespace minfer {
namespace {

using Json = nlohmann::ordered_json;
using chat::ToolCallFormat;

constexpr int32_t kEog = 256;

std::shared_ptr<const grammar::GrammarVocabulary> byte_vocabulary() {
    static const auto v = [] {
        std::vector<std::string> pieces;
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
        pieces.emplace_back();
        return std::make_shared<grammar::GrammarVocabulary>(
            std::move(pieces), std::vector<int32_t>{kEog},
            std::unordered_map<std::string, int32_t>{});
    }();
    return v;
}

Json tools() {
    return Json::parse(R"([
      {"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
          "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "add",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
          "b": {"type": "integer"}}, "required": ["a", "b"]}}}])");
}

// A random sentence of the grammar, one byte at a time (ending where it may, half the time).
std::string draw(const std::shared_ptr<grammar::CompiledGrammar>& g, std::mt19937& rng) {
    grammar::GrammarMatcher m(g);
    grammar::TokenMask mask(257);
    std::string text;
    for (int step = 0; step < 4000; ++step) {
        m.fill_mask(mask);
        if (mask.test(kEog) && (rng() % 2 == 0 || mask.count() == 1)) return text;
        std::vector<int32_t> allowed;
        for (int32_t b = 0; b < 256; ++b) {
            // Plain ASCII where the grammar allows it, to keep texts readable.
            if (mask.test(b)) allowed.push_back(b);
        }
        if (allowed.empty()) return text;
        const int32_t pick = allowed[rng() % allowed.size()];
        EXPECT_TRUE(m.accept(pick));
        text += static_cast<char>(pick);
    }
    ADD_FAILURE() << "no end after 4000 bytes: " << text.substr(0, 200);
    return text;
}

const ToolCallFormat kFormats[] = {ToolCallFormat::Hermes,         ToolCallFormat::Llama3,
                                   ToolCallFormat::Mistral,        ToolCallFormat::FunctionaryV31,
                                   ToolCallFormat::FunctionaryV32, ToolCallFormat::FireFunction,
                                   ToolCallFormat::CommandR,       ToolCallFormat::CommandR7b,
                                   ToolCallFormat::DeepSeekR1,     ToolCallFormat::Generic};

void check_calls(const chat::ParsedAnswer& parsed, const std::string& text,
                 const std::string& only_name) {
    for (const chat::ToolCall& c : parsed.calls) {
        const Json args = Json::parse(c.arguments);
        if (c.name == "get_weather") {
            EXPECT_TRUE(args.contains("city")) << text;
        } else {
            EXPECT_EQ(c.name, "add") << text;
            EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << text;
        }
        if (!only_name.empty()) {
            EXPECT_EQ(c.name, only_name) << text;
        }
    }
}

TEST(ToolCallGrammar, RequiredAnswersAreCallsThatParse) {
    std::mt19937 rng(5);
    for (const ToolCallFormat f : kFormats) {
        SCOPED_TRACE(chat::tool_call_format_name(f));
        for (const bool parallel : {false, true}) {
            const auto g = grammar::CompiledGrammar::compile(
                tool_call_grammar(f, tools(), {ToolChoice::Kind::Required, ""}, parallel),
                byte_vocabulary());
            for (int i = 0; i < 20; ++i) {
                const std::string text = draw(g, rng);
                const auto parsed = chat::parse_tool_calls(f, text);
                ASSERT_GE(parsed.calls.size(), 1u) << text;
                if (!parallel) {
                    EXPECT_EQ(parsed.calls.size(), 1u) << text;
                }
                EXPECT_EQ(parsed.content, "") << text;
                check_calls(parsed, text, "");
            }
        }
    }
}

TEST(ToolCallGrammar, ANamedToolIsTheOneCalled) {
    std::mt19937 rng(6);
    for (const ToolCallFormat f : kFormats) {
        SCOPED_TRACE(chat::tool_call_format_name(f));
        const auto g = grammar::CompiledGrammar::compile(
            tool_call_grammar(f, tools(), {ToolChoice::Kind::Named, "add"}, true),
            byte_vocabulary());
        for (int i = 0; i < 10; ++i) {
            const std::string text = draw(g, rng);
            const auto parsed = chat::parse_tool_calls(f, text);
            ASSERT_GE(parsed.calls.size(), 1u) << text;
            check_calls(parsed, text, "add");
        }
    }
}

TEST(ToolCallGrammar, AutoAllowsTextAndCalls) {
    std::mt19937 rng(7);
    for (const ToolCallFormat f : kFormats) {
        SCOPED_TRACE(chat::tool_call_format_name(f));
        const auto g = grammar::CompiledGrammar::compile(
            tool_call_grammar(f, tools(), {ToolChoice::Kind::Auto, ""}, true), byte_vocabulary());
        int calls = 0, texts = 0;
        for (int i = 0; i < 40; ++i) {
            const std::string text = draw(g, rng);
            const auto parsed = chat::parse_tool_calls(f, text);
            check_calls(parsed, text, "");
            parsed.calls.empty() ? ++texts : ++calls;
        }
        EXPECT_GT(texts, 0);
        // Plain text without the trigger, and text with it that is not a call, are told apart.
        grammar::GrammarMatcher m(g);
        if (f == ToolCallFormat::FunctionaryV32) {
            EXPECT_TRUE(m.accept_bytes("all\nHello there."));
        } else {
            EXPECT_TRUE(m.accept_bytes("Hello there."));
        }
        const std::string_view trigger = chat::tool_call_trigger(f);
        if (!trigger.empty() && f != ToolCallFormat::FunctionaryV32) {
            grammar::GrammarMatcher with_trigger(g);
            // (firefunction's template writes a space before its marker.)
            const std::string start = f == ToolCallFormat::FireFunction ? " " + std::string(trigger)
                                                                        : std::string(trigger);
            EXPECT_TRUE(with_trigger.accept_bytes(start));
            EXPECT_FALSE(with_trigger.accept_bytes("nonsense"));
        }
    }
}

TEST(ToolCallGrammar, UnknownNamedToolAndBadSchemas) {
    EXPECT_THROW(tool_call_grammar(ToolCallFormat::Hermes, tools(),
                                   {ToolChoice::Kind::Named, "nope"}, false),
                 UsageError);
    Json bad = tools();
    bad[0]["function"]["parameters"]["properties"]["city"]["multipleOf"] = 2;
    try {
        tool_call_grammar(ToolCallFormat::Hermes, bad, {}, false);
        FAIL();
    } catch (const UsageError& e) {
        EXPECT_EQ(std::string(e.what()),
                  "the parameters of the tool 'get_weather': json schema: unsupported keyword "
                  "'multipleOf' at #/properties/city");
    }
}

TEST(ToolCallGrammar, MessagesForTemplates) {
    const Json messages = Json::parse(R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "add", "arguments": "{\"a\": 1, \"b\": 2}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "3"}])");
    const Json objects = messages_for_template(ToolCallFormat::Hermes, messages, tools(), false);
    EXPECT_EQ(objects[1]["tool_calls"][0]["function"]["arguments"],
              Json::parse(R"({"a":1,"b":2})"));
    const Json strings = messages_for_template(ToolCallFormat::Hermes, objects, tools(), true);
    EXPECT_EQ(strings[1]["tool_calls"][0]["function"]["arguments"], R"({"a":1,"b":2})");
    const Json generic = messages_for_template(ToolCallFormat::Generic, messages, tools(), false);
    ASSERT_EQ(generic.size(), 4u);
    EXPECT_EQ(generic[0]["role"], "system");
    EXPECT_NE(generic[0]["content"].get<std::string>().find("\"tool_calls\""), std::string::npos);
}

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

// Where a format's markers are control tokens (Mistral's [TOOL_CALLS], Command R7B's
// <|START_ACTION|>, DeepSeek's), the grammar offers the token, not only its text spelled out.
TEST(ToolCallGrammar, MarkersThatAreControlTokensAreOffered) {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
    const std::vector<std::string> markers = {"[TOOL_CALLS]",          "<|START_ACTION|>",
                                              "<|END_ACTION|>",        "<｜tool▁calls▁begin｜>",
                                              "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>",
                                              "<｜tool▁call▁end｜>",   "<｜tool▁calls▁end｜>"};
    std::unordered_map<std::string, int32_t> special;
    for (const std::string& m : markers) {
        special[m] = static_cast<int32_t>(pieces.size());
        pieces.emplace_back();  // control tokens print nothing
    }
    pieces.emplace_back();  // EOG
    const auto vocab = std::make_shared<grammar::GrammarVocabulary>(
        pieces, std::vector<int32_t>{static_cast<int32_t>(pieces.size() - 1)}, special);
    grammar::TokenMask mask(vocab->n_vocab());
    const auto first_mask = [&](ToolCallFormat f) {
        grammar::GrammarMatcher m(grammar::CompiledGrammar::compile(
            tool_call_grammar(f, tools(), {ToolChoice::Kind::Required, ""}, true), vocab));
        m.fill_mask(mask);
        return m;
    };
    first_mask(ToolCallFormat::Mistral);
    EXPECT_TRUE(mask.test(special["[TOOL_CALLS]"]));
    first_mask(ToolCallFormat::CommandR7b);
    EXPECT_TRUE(mask.test(special["<|START_ACTION|>"]));
    auto m = first_mask(ToolCallFormat::DeepSeekR1);
    EXPECT_TRUE(mask.test(special["<｜tool▁calls▁begin｜>"]));
    ASSERT_TRUE(m.accept(special["<｜tool▁calls▁begin｜>"]));
    m.fill_mask(mask);
    EXPECT_TRUE(mask.test(special["<｜tool▁call▁begin｜>"]));
}

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

TEST(ReasoningThen, FreeReasoningThenTheConstrainedAnswer) {
    const auto g = grammar::CompiledGrammar::compile(
        reasoning_then(grammar::parse_gbnf("root ::= \"{\" text \"}\"\ntext ::= [a-z]+"),
                       "</think>"),
        byte_vocabulary());
    const auto accepts = [&](const std::string& s) {
        grammar::GrammarMatcher m(g);
        return m.accept_bytes(s) && m.is_complete();
    };
    EXPECT_TRUE(accepts("Let me see: {maybe}.</think>\n\n{yes}"));
    EXPECT_TRUE(accepts("</think>{no}"));
    EXPECT_FALSE(accepts("{yes}"));                    // the reasoning must end first
    EXPECT_FALSE(accepts("a</think>b</think>{yes}"));  // and once
    EXPECT_FALSE(accepts("</think>{Yes}"));
}

}  // namespace
}  // namespace minfer
