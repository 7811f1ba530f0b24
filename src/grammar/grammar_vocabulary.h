#pragma once
// What grammars need of a tokenizer, built once per model: the bytes of every token a grammar can
// match (the text generation prints for it), sorted so that tokens sharing a prefix are
// neighbours and a walk over the vocabulary advances the grammar once per shared prefix; the
// end-of-generation tokens; the control tokens by their text (a grammar literal equal to one also
// matches that token); and the token masks computed for grammar positions, shared between grammars
// by the position's structure (two JSON grammars share their string-character masks).
//
// Control, unknown and end-of-generation tokens print nothing and are not matched by bytes;
// neither are tokens longer than kMaxTokenBytes (no real vocabulary has them).
// Thread-safe: the cache has its own lock.

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/token_mask.h"

namespace minfer {
class Tokenizer;
}

namespace minfer::grammar {

// What a grammar position allows whatever surrounds it: the tokens its rule matches on its own
// (`accepted`), and the tokens that need the rule to end inside them (`uncertain`), each with the
// number of bytes the rule matches before it ends, so that only the rest is left to the stack
// below. This depends only on the structure the position can reach, never on the grammar around
// it, so grammars of one vocabulary share it.
struct PositionMasks {
    struct Uncertain {
        uint32_t rank;    // in the vocabulary's byte order
        uint32_t inside;  // bytes matched inside the rule; the rest must follow its caller
    };
    bool dense = false;                 // accepted as a bitset, else as a list of ids
    TokenMask accepted_bits;            // dense
    std::vector<int32_t> accepted_ids;  // !dense
    // Sorted by the rest's first two bytes, and grouped: `groups` are the runs of one two-byte
    // start (`second` 256: a rest of one byte), those of first byte b are groups[group_of[b],
    // group_of[b + 1]). A walk that finds a byte or a pair refused skips its entries at once.
    struct Group {
        uint16_t second;
        uint32_t begin, end;  // in `uncertain`
    };
    std::vector<Uncertain> uncertain;
    std::vector<Group> groups;
    std::vector<uint32_t> group_of;  // 257 entries
    void add_accepted_to(TokenMask& mask) const;
    std::size_t bytes() const;
};

inline constexpr std::size_t kMaxTokenBytes = 4096;

class GrammarVocabulary {
  public:
    explicit GrammarVocabulary(const Tokenizer& tokenizer);
    // Tests: a vocabulary of byte strings (empty: not matched by bytes), eog ids, control texts.
    GrammarVocabulary(std::vector<std::string> pieces, std::vector<int32_t> eog,
                      std::unordered_map<std::string, int32_t> special_tokens);

    int32_t n_vocab() const { return n_vocab_; }
    // The tokens matched by bytes, in byte order: rank -> id and bytes.
    std::size_t n_ranked() const { return sorted_ids_.size(); }
    int32_t id_at(std::size_t rank) const { return sorted_ids_[rank]; }
    std::string_view bytes_at(std::size_t rank) const { return bytes_of(sorted_ids_[rank]); }

    // The trie of the tokens' bytes, its nodes in depth-first order: a node's subtree is the
    // nodes up to `end`, so a walk skips a prefix nothing can follow in one step. Node 0 is the
    // empty prefix.
    struct TrieNode {
        uint32_t end;         // one past the last node of this node's subtree
        uint32_t rank_begin;  // the tokens whose bytes are exactly this prefix: ranks
        uint32_t rank_count;  //   [rank_begin, rank_begin + rank_count)
        uint16_t depth;       // the prefix's length
        uint8_t byte;         // its last byte
    };
    const std::vector<TrieNode>& trie() const { return trie_; }
    // "" for tokens not matched by bytes.
    std::string_view bytes_of(int32_t id) const;
    const std::vector<int32_t>& eog_tokens() const { return eog_; }
    const std::unordered_map<std::string, int32_t>& special_tokens() const { return special_; }

    // The cache of position masks by structural key (compiled_grammar.cpp makes the keys).
    std::shared_ptr<const PositionMasks> cached(const std::string& key) const;
    void cache(const std::string& key, std::shared_ptr<const PositionMasks> masks) const;

  private:
    void build(std::vector<std::string> pieces);

    int32_t n_vocab_ = 0;
    std::string bytes_;             // every piece, concatenated
    std::vector<uint32_t> offset_;  // id -> [offset_[id], offset_[id + 1]) in bytes_
    std::vector<int32_t> sorted_ids_;
    std::vector<TrieNode> trie_;
    std::vector<int32_t> eog_;
    std::unordered_map<std::string, int32_t> special_;

    mutable std::mutex mutex_;
    mutable std::unordered_map<std::string, std::shared_ptr<const PositionMasks>> cache_;
    mutable std::size_t cache_bytes_ = 0;
};

}  // namespace minfer::grammar
