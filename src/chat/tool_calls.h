#pragma once
// Tool calls in a model's answer: which syntax a chat template teaches its model, and the calls
// (name, arguments as JSON text) parsed back out of the generated text, whole or as it streams.
//
//   format         what the model writes                                     (templates)
//   Hermes         <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>   Qwen 2.5/3, Hermes
//   2/3 Llama3         {"name": N, "parameters": {...}}  (the whole answer)          Llama 3.1-3.3
//   Mistral        [TOOL_CALLS][{"name": N, "arguments": {...}, "id": ID}]      Mistral, Nemo
//   FunctionaryV31 <function=N>{...}</function>                                 functionary v3.1
//   FunctionaryV32 N\n{...}>>>N2\n{...}  (after the prompt's >>>; "all" = text)  functionary v3.2
//   FireFunction   functools[{"name": N, "arguments": {...}}, ...]              firefunction v2
//   CommandR       Action: ```json\n[{"tool_name": N, "parameters": {...}}]\n```  Command R+
//   CommandR7b     <|START_ACTION|>[{"tool_name": N, "parameters": {...}}]<|END_ACTION|>
//   DeepSeekR1
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>N\n```json\n{...}\n```<｜tool▁call▁end｜>
//   Generic        {"tool_calls": [{"name": N, "arguments": {...}}]}  (templates without tools:
//                  minfer describes the tools in a system message)
//
// Text that cannot be parsed as a call stays content: nothing the model wrote is lost.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::chat {

enum class ToolCallFormat {
    Hermes,
    Llama3,
    Mistral,
    FunctionaryV31,
    FunctionaryV32,
    FireFunction,
    CommandR,
    CommandR7b,
    DeepSeekR1,
    Generic,
};

ToolCallFormat detect_tool_call_format(std::string_view template_source);
const char* tool_call_format_name(ToolCallFormat format);
// The text that starts a call ("<tool_call>"); empty for formats where the answer's first
// character decides (Llama3, Generic: '{').
std::string_view tool_call_trigger(ToolCallFormat format);
// Control-token texts the format uses as markers: they must reach the parser, not be hidden.
std::vector<std::string_view> tool_call_markers(ToolCallFormat format);

struct ToolCall {
    std::string id;  // given by the caller (parse leaves it as the model wrote it, or "")
    std::string name;
    std::string arguments;  // a JSON object's text
};

struct ParsedAnswer {
    std::string content;  // the text around the calls (trimmed when calls were found)
    std::vector<ToolCall> calls;
};

ParsedAnswer parse_tool_calls(ToolCallFormat format, std::string_view text);

// The answer as it streams: text that cannot start a call comes out at once; text that may is
// held until it is clearly content or a whole call. finish() parses what is left.
class ToolCallStream {
  public:
    explicit ToolCallStream(ToolCallFormat format) : format_(format) {}
    ParsedAnswer push(std::string_view text);
    ParsedAnswer finish();

  private:
    ToolCallFormat format_;
    std::string held_;       // text not handed out yet
    bool in_calls_ = false;  // a call has begun: everything from here is parsed at the end
    bool started_ = false;   // something other than whitespace has been seen
};

// An id for a call: "call_" and 24 letters or digits, or 9 letters or digits for Mistral
// (whose template refuses others).
std::string new_tool_call_id(ToolCallFormat format);

}  // namespace minfer::chat
