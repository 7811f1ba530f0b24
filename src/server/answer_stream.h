#pragma once
// One answer as the engine streams it, split into what each API returns apart: the reasoning
// (a <think> block), the content, and the tool calls parsed out of it. Every front end's writer
// (OpenAI's completions, Anthropic's messages) feeds its choices' tokens through one of these.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "server/reasoning_split.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

// What the request and the model's template say about the answers' form.
struct AnswerShape {
    bool reasoning = false;            // the template writes <think> blocks
    bool starts_in_reasoning = false;  // the prompt ends inside one
    // Chat with tools: calls are parsed out of each answer in this syntax.
    std::optional<chat::ToolCallFormat> tool_format;
    // tool_choice "required" or a named function: the grammar makes the answer calls and
    // nothing else, so no text goes to the content, and a call the token budget cut short (the
    // text left unparsed at the end) is dropped.
    bool calls_only = false;
    // The control tokens that are the call syntax's markers: their text is kept for the parser
    // (it is not shown otherwise).
    std::vector<int32_t> marker_tokens;
};

struct AnswerPiece {
    std::string reasoning, content;
    std::vector<chat::ToolCall> calls;  // complete calls, without ids (each API gives its own)

    bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
};

class AnswerStream {
  public:
    AnswerStream(const AnswerShape& shape, const Tokenizer& tokenizer);

    // A token (-1: only text, flushed at the end of the sequence) and its text.
    AnswerPiece push(int32_t token, const std::string& text);
    // At the end: what was held back.
    AnswerPiece finish();

  private:
    AnswerPiece take_calls(SplitText text, bool at_end);

    const AnswerShape& shape_;
    const Tokenizer& tokenizer_;
    ReasoningSplitter splitter_;
    std::optional<chat::ToolCallStream> calls_;
};

}  // namespace minfer::server
