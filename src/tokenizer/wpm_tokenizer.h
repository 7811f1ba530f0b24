#pragma once
// WordPiece (tokenizer.ggml.model = bert), as llama.cpp runs it: lowercase, strip accents, drop
// control characters, split at whitespace and around punctuation and CJK ideographs, then cover
// each word (prefixed with U+2581, which the converted vocabularies use to mark a word start)
// greedily with the longest tokens from the left; a word that cannot be covered becomes UNK.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace minfer {

// The normalised words of a text (tests).
std::vector<std::string> wpm_words(std::string_view text);

void wpm_encode(const Vocabulary& vocab, std::string_view text, std::vector<int32_t>& out);

}  // namespace minfer
