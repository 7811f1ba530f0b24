#pragma once
// What a Tokenizer holds (shared by tokenizer.cpp and detokenizer.cpp).

#include <optional>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/spm_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocabulary.h"

namespace minfer {

struct Tokenizer::Impl {
    Vocabulary vocab;
    SpmTokenizer spm;                 // kind Spm
    BpeTokenizer bpe;                 // kind Bpe
    std::optional<PreTokenizer> pre;  // kind Bpe
};

// detokenizer.cpp
std::string token_piece(const Vocabulary& vocab, int32_t id, bool show_special);
void clean_up_spaces(std::string& text);

}  // namespace minfer
