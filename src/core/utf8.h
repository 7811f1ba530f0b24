#pragma once
// UTF-8 pieces shared by the tokenizer and the template engine (each keeps its own decoder: the
// tokenizer decodes leniently as llama.cpp does, the template engine as Python does).

#include <string>
#include <string_view>

namespace minfer {

// Appends the UTF-8 form of cp (cp <= U+10FFFF; surrogates are encoded as they are).
void append_utf8(std::string& out, char32_t cp);

// Strict UTF-8: no overlong forms, surrogates, truncated sequences or code points past U+10FFFF.
bool is_valid_utf8(std::string_view text);

}  // namespace minfer
