#pragma once
// UTF-8 pieces shared by the tokenizer and the template engine. The strict decoder is the template
// engine's (Python's rules); the tokenizer keeps its own lenient one, as llama.cpp decodes.

#include <cstddef>
#include <string>
#include <string_view>

namespace minfer {

// Appends the UTF-8 form of cp (cp <= U+10FFFF; surrogates are encoded as they are).
void append_utf8(std::string& out, char32_t cp);

// Strict UTF-8: no overlong forms, surrogates, truncated sequences or code points past U+10FFFF.
bool is_valid_utf8(std::string_view text);

// Decodes the strict UTF-8 sequence at text[i] (i < text.size()) into cp and returns its length
// in bytes, or 0 when no valid sequence starts there.
std::size_t decode_utf8(std::string_view text, std::size_t i, char32_t& cp);

}  // namespace minfer
