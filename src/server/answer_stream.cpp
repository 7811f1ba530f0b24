#include "server/answer_stream.h"

#include <algorithm>

namespace minfer::server {

AnswerStream::AnswerStream(const AnswerShape& shape, const Tokenizer& tokenizer)
    : shape_(shape), tokenizer_(tokenizer), splitter_(shape.reasoning, shape.starts_in_reasoning) {
    if (shape.tool_format) calls_.emplace(*shape.tool_format);
}

AnswerPiece AnswerStream::push(int32_t token, const std::string& text) {
    const bool marker =
        token >= 0 && std::find(shape_.marker_tokens.begin(), shape_.marker_tokens.end(), token) !=
                          shape_.marker_tokens.end();
    const std::string shown =
        marker ? text + tokenizer_.token_to_piece(token, /*show_special=*/true) : text;
    return take_calls(splitter_.push(shown), /*at_end=*/false);
}

AnswerPiece AnswerStream::finish() {
    return take_calls(splitter_.finish(), /*at_end=*/true);
}

AnswerPiece AnswerStream::take_calls(SplitText text, bool at_end) {
    AnswerPiece piece;
    piece.reasoning = std::move(text.reasoning);
    if (!calls_) {
        piece.content = std::move(text.content);
        return piece;
    }
    chat::ParsedAnswer parsed = calls_->push(text.content);
    if (at_end) {
        chat::ParsedAnswer rest = calls_->finish();
        parsed.content += rest.content;
        parsed.calls.insert(parsed.calls.end(), rest.calls.begin(), rest.calls.end());
    }
    // Constrained to calls, the only text is call syntax the parser has not taken: a call cut
    // short.
    if (!shape_.calls_only) piece.content = std::move(parsed.content);
    piece.calls = std::move(parsed.calls);
    return piece;
}

}  // namespace minfer::server
