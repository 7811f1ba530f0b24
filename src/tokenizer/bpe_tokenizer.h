#pragma once
// Byte-level BPE (tokenizer.ggml.model = gpt2), as llama.cpp runs it: each pre-tokenized word is
// turned into one symbol per byte (in GPT-2's byte-level form), then the adjacent pair with the
// lowest merge rank (leftmost on ties) is joined until no merge applies. Symbols are ids:
// vocabulary ids for texts that are tokens, further ids for merge parts and results that are not.

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/hash_tables.h"
#include "tokenizer/vocabulary.h"

namespace minfer {

class GgufMetadata;

class BpeTokenizer {
  public:
    BpeTokenizer() = default;
    // Reads tokenizer.ggml.merges ("left right" strings, rank = index). Throws FormatError.
    BpeTokenizer(const Vocabulary& vocab, const GgufMetadata& meta);

    // Tokenizes one word (raw bytes, canonical UTF-8); appends ids to out.
    void encode_word(const Vocabulary& vocab, std::string_view word,
                     std::vector<int32_t>& out) const;

    std::size_t merge_count() const { return merges_.size(); }

  private:
    int32_t symbol_of(const Vocabulary& vocab, std::string_view text, bool create);
    void append_fallback(const Vocabulary& vocab, std::string_view bytes,
                         std::vector<int32_t>& out) const;

    MergeTable merges_;
    std::vector<std::string> extra_texts_;  // symbol vocab.size() + i
    TextIdTable extra_index_;
    std::array<int32_t, 256> byte_symbols_{};
};

}  // namespace minfer
