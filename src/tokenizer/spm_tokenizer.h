#pragma once
// SentencePiece-style BPE over token scores (tokenizer.ggml.model = llama), as llama.cpp runs it:
// start from UTF-8 characters, repeatedly join the adjacent pair whose joined text is the token
// with the highest score (leftmost on ties), then emit each piece's token or, failing that, its
// bytes as <0xNN> tokens.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocabulary.h"

namespace minfer {

class TokenCache;

class SpmTokenizer {
  public:
    SpmTokenizer() = default;
    explicit SpmTokenizer(const Vocabulary& vocab);

    // Tokenizes text whose spaces are already escaped as U+2581; appends ids to out.
    void encode(const Vocabulary& vocab, std::string_view text, std::vector<int32_t>& out,
                TokenCache& cache) const;

    // The token for a byte that has no piece (<0xNN>, else the byte itself, else UNK).
    int32_t byte_token(uint8_t byte) const { return byte_tokens_[byte]; }

  private:
    void encode_chunk(const Vocabulary& vocab, std::string_view text,
                      std::vector<int32_t>& out) const;

    std::array<int32_t, 256> byte_tokens_{};
    // True when no token has U+2581 after another character, so that no token can span the
    // start of a new word: each word can then be tokenized (and cached) on its own.
    bool words_are_independent_ = false;
};

}  // namespace minfer
