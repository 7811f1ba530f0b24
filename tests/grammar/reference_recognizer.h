#pragma once
// A slow recognizer that interprets a grammar's expressions directly, by backtracking over bytes:
// the independent oracle the matcher's token masks are checked against. Only for small grammars
// and short texts (it is exponential in the worst case), and grammars whose rules can all finish.

#include <string_view>

#include "grammar/grammar.h"

namespace minfer::grammar::testing {

// The text is the start of some sentence of the grammar (or a whole one).
bool viable_prefix(const Grammar& g, std::string_view text);
// The text is a whole sentence of the grammar.
bool is_sentence(const Grammar& g, std::string_view text);

}  // namespace minfer::grammar::testing
