#pragma once
// One bit per token of the vocabulary: the tokens a grammar allows next.

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace minfer::grammar {

class TokenMask {
  public:
    TokenMask() = default;
    explicit TokenMask(int32_t n_vocab)
        : n_vocab_(n_vocab), words_((static_cast<std::size_t>(n_vocab) + 63) / 64, 0) {}

    int32_t n_vocab() const { return n_vocab_; }
    void clear() { std::fill(words_.begin(), words_.end(), 0); }
    void set(int32_t id) { words_[static_cast<std::size_t>(id) >> 6] |= uint64_t{1} << (id & 63); }
    bool test(int32_t id) const {
        return (words_[static_cast<std::size_t>(id) >> 6] >> (id & 63)) & 1;
    }
    // This mask is `other` on its first other.n_vocab() tokens, and false beyond.
    void copy_from(const TokenMask& other) {
        std::fill(words_.begin(), words_.end(), 0);
        std::copy_n(other.words_.begin(), std::min(words_.size(), other.words_.size()),
                    words_.begin());
    }
    void merge(const TokenMask& other) {
        for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
    }
    std::size_t count() const {
        std::size_t n = 0;
        for (const uint64_t w : words_) n += static_cast<std::size_t>(__builtin_popcountll(w));
        return n;
    }
    std::span<const uint64_t> words() const { return words_; }

  private:
    int32_t n_vocab_ = 0;
    std::vector<uint64_t> words_;
};

}  // namespace minfer::grammar
