#include "runtime/tool_calling.h"

#include <map>

#include "core/error.h"
#include "core/utf8.h"
#include "grammar/json_schema.h"

namespace minfer {
namespace {

using Json = nlohmann::ordered_json;
using chat::ToolCallFormat;

std::string lit(std::string_view text) {
    return grammar::expr_to_gbnf(grammar::Expr::literal(std::string(text)));
}

struct Rules {
    std::string start;  // the rule to refer to
    std::string text;   // the rules, one a line
};

// Rules for any text that does not contain `word` (the trigger of a call): a matcher of the
// word's prefixes (as Knuth-Morris-Pratt's), where completing the word is the one way out.
Rules text_without(grammar::JsonGrammarBuilder& b, std::string_view word) {
    std::vector<char32_t> w;
    char32_t cp = 0;
    for (std::size_t i = 0; i < word.size();) {
        const std::size_t n = decode_utf8(word, i, cp);
        if (n == 0) throw Error("tool-call trigger is not UTF-8");
        w.push_back(cp);
        i += n;
    }
    const std::size_t m = w.size();
    // failure[k]: the longest proper prefix of w[0..k) that is also its suffix.
    std::vector<std::size_t> failure(m + 1, 0);
    for (std::size_t k = 2; k <= m; ++k) {
        std::size_t f = failure[k - 1];
        while (f > 0 && w[f] != w[k - 1]) f = failure[f];
        if (w[f] == w[k - 1]) ++f;
        failure[k] = f;
    }
    const auto next_state = [&](std::size_t k, char32_t c) {
        while (k > 0 && w[k] != c) k = failure[k];
        return w[k] == c ? k + 1 : 0;
    };
    std::vector<grammar::CodepointRange> letters;
    for (const char32_t c : w) letters.push_back({c, c});
    letters = grammar::normalize(letters);
    const std::string others =
        grammar::expr_to_gbnf(grammar::Expr::char_class(grammar::complement(letters)));
    std::vector<std::string> names(m);
    for (std::size_t k = 0; k < m; ++k) names[k] = b.reserve_name("text");
    std::string rules;
    for (std::size_t k = 0; k < m; ++k) {
        std::string body = "\"\" | " + others + " " + names[0];
        for (const auto& r : letters) {
            for (char32_t c = r.lo; c <= r.hi; ++c) {
                const std::size_t to = next_state(k, c);
                if (to == m) continue;  // the word itself: not text
                std::string letter;
                append_utf8(letter, c);
                body += " | " + lit(letter) + " " + names[to];
            }
        }
        rules += names[k] + " ::= " + body + "\n";
    }
    return {names[0], rules};
}

struct CallSyntax {
    std::string open, close;  // around all the calls
    std::string separator;    // between two calls
};

// One call of `name` with arguments rule `args`, in the format's syntax.
std::string call_of(ToolCallFormat f, const std::string& name, const std::string& args) {
    const std::string n = lit(name);
    switch (f) {
        case ToolCallFormat::Hermes:
            return lit("<tool_call>\n{\"name\": \"") + " " + n + " " + lit("\", \"arguments\": ") +
                   " " + args + " " + lit("}\n</tool_call>");
        case ToolCallFormat::Llama3:
            return lit("{\"name\": \"") + " " + n + " " + lit("\", \"parameters\": ") + " " + args +
                   " \"}\"";
        case ToolCallFormat::FunctionaryV31:
            return lit("<function=") + " " + n + " \">\" " + args + " " + lit("</function>");
        case ToolCallFormat::FunctionaryV32:
            return n + " \"\\n\" " + args;
        case ToolCallFormat::CommandR:
        case ToolCallFormat::CommandR7b:
            return lit("{\"tool_name\": \"") + " " + n + " " + lit("\", \"parameters\": ") + " " +
                   args + " \"}\"";
        case ToolCallFormat::DeepSeekR1:
            return lit("<｜tool▁call▁begin｜>function<｜tool▁sep｜>") + " " + n + " " +
                   lit("\n```json\n") + " " + args + " " + lit("\n```<｜tool▁call▁end｜>");
        case ToolCallFormat::Mistral:
        case ToolCallFormat::FireFunction:
        case ToolCallFormat::Generic:
            return lit("{\"name\": \"") + " " + n + " " + lit("\", \"arguments\": ") + " " + args +
                   " \"}\"";
    }
    return n;
}

CallSyntax syntax_of(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
            return {"", "", lit("\n")};
        case ToolCallFormat::Llama3:
            return {"", "", lit("; ")};
        case ToolCallFormat::Mistral:
            return {lit("[TOOL_CALLS][") + " ", " \"]\"", lit(", ")};
        case ToolCallFormat::FunctionaryV31:
            return {"", "", ""};
        case ToolCallFormat::FunctionaryV32:
            return {"", "", lit(">>>")};
        case ToolCallFormat::FireFunction:
            return {lit(" functools[") + " ", " \"]\"", lit(", ")};
        case ToolCallFormat::CommandR:
            return {lit("Action: ```json\n[") + " ", " " + lit("]\n```"), lit(", ")};
        case ToolCallFormat::CommandR7b:
            return {lit("<|START_ACTION|>[") + " ", " " + lit("]<|END_ACTION|>"), lit(", ")};
        case ToolCallFormat::DeepSeekR1:
            return {lit("<｜tool▁calls▁begin｜>") + " ", " " + lit("<｜tool▁calls▁end｜>"), ""};
        case ToolCallFormat::Generic:
            return {lit("{\"tool_calls\": [") + " ", " " + lit("]}"), lit(", ")};
    }
    return {};
}

}  // namespace

grammar::Grammar tool_call_grammar(ToolCallFormat format, const Json& tools,
                                   const ToolChoice& choice, bool parallel) {
    grammar::JsonGrammarBuilder b;
    std::string one_call;
    for (const Json& tool : tools) {
        const Json& fn = tool["function"];
        const std::string name = fn["name"].get<std::string>();
        if (choice.kind == ToolChoice::Kind::Named && name != choice.name) continue;
        const Json parameters = fn.contains("parameters") && !fn["parameters"].is_null()
                                    ? fn["parameters"]
                                    : Json{{"type", "object"}};
        std::string args;
        try {
            args = b.add_schema(parameters, "args-" + name);
        } catch (const UsageError& e) {
            throw UsageError(concat("the parameters of the tool '", name, "': ", e.what()));
        }
        if (!one_call.empty()) one_call += " | ";
        one_call += "(" + call_of(format, name, args) + ")";
    }
    if (one_call.empty()) throw UsageError(concat("no tool is named '", choice.name, "'"));
    const std::string call = b.add_rule("call", one_call);
    const CallSyntax s = syntax_of(format);
    // Llama 3's answer is one JSON object: one call.
    const bool several = parallel && format != ToolCallFormat::Llama3;
    const std::string repeat = several ? "(" + s.separator + " " + call + ")*" : "";
    const std::string calls =
        b.add_rule("calls", s.open + " " + call + " " + repeat + " " + s.close);
    std::string root = calls, extra;
    if (choice.kind == ToolChoice::Kind::Auto) {
        const std::string_view trigger = chat::tool_call_trigger(format);
        if (format == ToolCallFormat::FunctionaryV32) {
            // The answer names its recipient: "all" for text (which has no ">>>" in it).
            const Rules text = text_without(b, ">>>");
            extra = text.text;
            root = calls + " | \"all\\n\" " + text.start;
        } else if (trigger.empty()) {
            // Llama 3 and the generic JSON: a call is the whole answer, and starts with '{'.
            root = calls + " | [^{ \\t\\r\\n] .* | \"\"";
        } else {
            const Rules text = text_without(b, trigger);
            extra = text.text;
            root = text.start + " (" + calls + ")?";
        }
    }
    return grammar::parse_gbnf("root ::= " + root + "\n" + extra + b.rules());
}

grammar::Grammar reasoning_then(const grammar::Grammar& answer, std::string_view close_tag) {
    grammar::Grammar renamed = answer;
    grammar::JsonGrammarBuilder b;
    for (const grammar::Rule& r : renamed.rules) b.reserve_name(r.name);  // keep them unique
    auto& root = renamed.rules[static_cast<std::size_t>(renamed.root)];
    root.name = b.reserve_name("answer");
    const Rules thinking = text_without(b, close_tag);
    return grammar::parse_gbnf("root ::= " + thinking.start + " " + lit(close_tag) +
                               " [ \\t\\r\\n]* " + root.name + "\n" + thinking.text +
                               renamed.to_gbnf());
}

Json messages_for_template(ToolCallFormat format, const Json& messages, const Json& tools,
                           bool arguments_as_text) {
    Json out = Json::array();
    for (const Json& m : messages) {
        Json copy = m;
        if (m.contains("tool_calls") && m["tool_calls"].is_array()) {
            for (Json& call : copy["tool_calls"]) {
                if (!call.contains("function") || !call["function"].is_object()) continue;
                Json& args = call["function"]["arguments"];
                if (!arguments_as_text && args.is_string()) {
                    try {
                        args = Json::parse(args.get<std::string>());
                    } catch (const Json::exception&) {
                        // Not JSON: the template gets the string as it came.
                    }
                } else if (arguments_as_text && !args.is_string()) {
                    args = args.dump();
                }
            }
        }
        out.push_back(std::move(copy));
    }
    if (format != ToolCallFormat::Generic || !tools.is_array() || tools.empty()) return out;
    const std::string description =
        "You can call these functions (given as JSON Schemas of their arguments):\n" +
        tools.dump(2) +
        "\nTo call functions, answer with this JSON and nothing else: {\"tool_calls\": "
        "[{\"name\": \"<function name>\", \"arguments\": {<the arguments>}}]}. To answer "
        "without calling a function, write the answer as plain text.";
    if (!out.empty() && out[0].value("role", "") == "system" && out[0]["content"].is_string()) {
        out[0]["content"] = out[0]["content"].get<std::string>() + "\n\n" + description;
    } else {
        out.insert(out.begin(), Json{{"role", "system"}, {"content", description}});
    }
    return out;
}

}  // namespace minfer
