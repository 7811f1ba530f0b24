#pragma once
// Tools in a chat request, for every front end: the grammar that makes an answer a well-formed
// call in the syntax the model's template teaches (arguments valid under each tool's parameters
// schema), and the conversation prepared for the template (earlier calls, tool results, and for
// templates that know no tools, the tools described in a system message).

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat/tool_calls.h"
#include "grammar/grammar.h"

namespace minfer {

struct ToolChoice {
    enum class Kind {
        None,      // no call: the tools are not shown to the model
        Auto,      // text, or calls
        Required,  // at least one call
        Named,     // a call of `name`
    };
    Kind kind = Kind::Auto;
    std::string name;
};

// OpenAI's tools ([{"type": "function", "function": {"name", "description", "parameters"}}]) are
// checked by the request parser; `parallel` allows several calls in one answer. Throws UsageError
// naming the tool whose parameters schema cannot be converted.
grammar::Grammar tool_call_grammar(chat::ToolCallFormat format, const nlohmann::ordered_json& tools,
                                   const ToolChoice& choice, bool parallel);

// Free text without `close_tag`, the tag, optional white space, then an answer of `answer`: the
// form of a constrained answer after a reasoning block the prompt has opened ("</think>").
grammar::Grammar reasoning_then(const grammar::Grammar& answer, std::string_view close_tag);

// The messages as templates take them: the arguments of earlier calls as objects (templates
// tojson them; `arguments_as_text` keeps the strings, for templates that concatenate them), and
// for the Generic format the tools and the JSON to answer with in a system message.
nlohmann::ordered_json messages_for_template(chat::ToolCallFormat format,
                                             const nlohmann::ordered_json& messages,
                                             const nlohmann::ordered_json& tools,
                                             bool arguments_as_text);

}  // namespace minfer
