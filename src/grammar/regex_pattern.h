#pragma once
// The regular expressions JSON schemas put in `pattern` (ECMAScript syntax, as ajv and browsers
// read them with the `u` flag), turned into a grammar expression: literals and escapes, `.`,
// classes with ranges and negation, \d \w \s and their negations, groups ((...), (?:...),
// (?<name>...)), alternation, and the quantifiers * + ? {n} {n,} {n,m} (lazy forms too: a
// grammar has no preference). A pattern is a search: without ^ or $ it may be surrounded by any
// text. Backreferences, lookaround and word boundaries cannot be expressed by a grammar and are
// refused with UsageError naming the construct and its offset.

#include <string_view>

#include "grammar/grammar.h"

namespace minfer::grammar {

// The strings the pattern matches. With json_escaped, the expression matches their JSON string
// encodings instead (the text between the quotes): `"` as \", a newline as \n, and so on.
Expr regex_to_expr(std::string_view pattern, bool json_escaped);

inline constexpr std::size_t kMaxPatternBytes = 16 << 10;

}  // namespace minfer::grammar
