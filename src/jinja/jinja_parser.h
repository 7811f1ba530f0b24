#pragma once
// Builds the syntax tree from tokens with jinja2's grammar (operator precedence, tests,
// filters, slices, statements). Errors are FormatError "line L, column C: ...".

#include <string_view>

#include "jinja/jinja_ast.h"

namespace minfer::jinja {

// Nesting deeper than this (brackets, expressions, blocks) is refused, so that hostile
// templates cannot exhaust the stack of the parser or the interpreter.
inline constexpr int kMaxNesting = 256;

Body parse_template(std::string_view source);

}  // namespace minfer::jinja
