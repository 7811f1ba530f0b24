#include "grammar/grammar_vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace minfer::grammar {
namespace {

// Masks kept for all grammars of a model together; past this the cache starts over.
constexpr std::size_t kMaxCacheBytes = std::size_t{256} << 20;

}  // namespace

void PositionMasks::add_accepted_to(TokenMask& mask) const {
    if (dense) {
        mask.merge(accepted_bits);
    } else {
        for (const int32_t id : accepted_ids) mask.set(id);
    }
}

std::size_t PositionMasks::bytes() const {
    return accepted_bits.words().size() * 8 + accepted_ids.size() * 4 + uncertain.size() * 8 +
           groups.size() * sizeof(Group) + group_of.size() * 4 + 64;
}

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer) : n_vocab_(tokenizer.n_vocab()) {
    std::vector<std::string> pieces(static_cast<std::size_t>(n_vocab_));
    for (int32_t id = 0; id < n_vocab_; ++id) {
        if (tokenizer.is_eog(id)) {
            eog_.push_back(id);
            continue;
        }
        pieces[static_cast<std::size_t>(id)] = tokenizer.token_to_piece(id, false);
        if (tokenizer.is_control(id)) {
            const std::string text = tokenizer.token_to_piece(id, true);
            if (!text.empty()) special_.try_emplace(text, id);
        }
    }
    build(std::move(pieces));
}

GrammarVocabulary::GrammarVocabulary(std::vector<std::string> pieces, std::vector<int32_t> eog,
                                     std::unordered_map<std::string, int32_t> special_tokens)
    : n_vocab_(static_cast<int32_t>(pieces.size())),
      eog_(std::move(eog)),
      special_(std::move(special_tokens)) {
    for (const int32_t id : eog_) pieces[static_cast<std::size_t>(id)].clear();
    build(std::move(pieces));
}

void GrammarVocabulary::build(std::vector<std::string> pieces) {
    offset_.reserve(pieces.size() + 1);
    for (const std::string& p : pieces) {
        offset_.push_back(static_cast<uint32_t>(bytes_.size()));
        bytes_ += p;
    }
    offset_.push_back(static_cast<uint32_t>(bytes_.size()));
    for (int32_t id = 0; id < n_vocab_; ++id) {
        const std::size_t size = pieces[static_cast<std::size_t>(id)].size();
        if (size > 0 && size <= kMaxTokenBytes) sorted_ids_.push_back(id);
    }
    std::sort(sorted_ids_.begin(), sorted_ids_.end(), [&](int32_t a, int32_t b) {
        const std::string_view x = bytes_of(a), y = bytes_of(b);
        return x != y ? x < y : a < b;
    });
    // Depth-first nodes: a token adds the prefixes it does not share with the previous one.
    trie_.push_back({0, 0, 0, 0, 0});
    std::vector<uint32_t> open{0};  // the nodes of the current path, by depth
    std::string_view previous;
    for (std::size_t r = 0; r < sorted_ids_.size(); ++r) {
        const std::string_view t = bytes_at(r);
        std::size_t common = 0;
        while (common < std::min(t.size(), previous.size()) && t[common] == previous[common])
            ++common;
        while (open.size() > common + 1) {
            trie_[open.back()].end = static_cast<uint32_t>(trie_.size());
            open.pop_back();
        }
        for (std::size_t d = common; d < t.size(); ++d) {
            open.push_back(static_cast<uint32_t>(trie_.size()));
            trie_.push_back({0, 0, 0, static_cast<uint16_t>(d + 1), static_cast<uint8_t>(t[d])});
        }
        TrieNode& leaf = trie_[open.back()];
        if (leaf.rank_count == 0) leaf.rank_begin = static_cast<uint32_t>(r);
        ++leaf.rank_count;
        previous = t;
    }
    for (const uint32_t node : open) trie_[node].end = static_cast<uint32_t>(trie_.size());
}

std::string_view GrammarVocabulary::bytes_of(int32_t id) const {
    const auto i = static_cast<std::size_t>(id);
    return std::string_view(bytes_).substr(offset_[i], offset_[i + 1] - offset_[i]);
}

std::shared_ptr<const PositionMasks> GrammarVocabulary::cached(const std::string& key) const {
    const std::lock_guard lock(mutex_);
    const auto it = cache_.find(key);
    return it == cache_.end() ? nullptr : it->second;
}

void GrammarVocabulary::cache(const std::string& key,
                              std::shared_ptr<const PositionMasks> masks) const {
    const std::lock_guard lock(mutex_);
    if (cache_bytes_ + masks->bytes() > kMaxCacheBytes) {
        cache_.clear();
        cache_bytes_ = 0;
    }
    cache_bytes_ += masks->bytes() + key.size();
    cache_.try_emplace(key, std::move(masks));
}

}  // namespace minfer::grammar
