#pragma once
// Splits template source into tokens the way jinja2's lexer does under Hugging Face's settings
// (trim_blocks and lstrip_blocks on, keep_trailing_newline off): text, {{ }}, {% %} and the
// names, literals and operators inside them. Comments and whitespace control are applied here.

#include <string>
#include <string_view>
#include <vector>

#include "jinja/jinja_ast.h"

namespace minfer::jinja {

enum class TokenType {
    Text,
    VariableBegin,
    VariableEnd,
    BlockBegin,
    BlockEnd,
    Name,
    String,
    Integer,
    Float,
    Operator,
    End
};

struct Token {
    TokenType type = TokenType::End;
    std::string value;  // text, name, operator, decoded string literal or number spelling
    SourcePos pos;
};

struct LexerOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
    bool keep_trailing_newline = false;
};

// Throws FormatError "line L, column C: ..." on malformed input (unterminated tags or strings,
// unbalanced brackets, stray characters).
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

// "line 3, column 7: " + message
std::string position_message(const SourcePos& pos, std::string_view message);

}  // namespace minfer::jinja
