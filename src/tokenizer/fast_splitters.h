#pragma once
// Hand-written equivalents of the two most used pre-tokenizer patterns (what llama.cpp also does
// for speed). Both walk one piece of canonical UTF-8 text and append word end offsets; tests check
// them against PCRE2 running the patterns themselves.
//
// GPT-2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
// Llama-3:  (?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|
//           \p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//           with D = 3 (Llama 3) or D = 1 (Qwen2, written \p{N} there).

#include <cstdint>
#include <string_view>
#include <vector>

namespace minfer {

// `text` is the whole text; the piece is [begin, end). Offsets appended are absolute.
void split_gpt2(std::string_view text, uint32_t begin, uint32_t end, std::vector<uint32_t>& ends);
void split_llama3(std::string_view text, uint32_t begin, uint32_t end, int max_digits,
                  std::vector<uint32_t>& ends);

}  // namespace minfer
