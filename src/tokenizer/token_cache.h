#pragma once
// Remembers the ids of words already tokenized during one tokenize() call: running text repeats
// its words, and looking a word up is much cheaper than merging it again. Keys are views into
// the caller's text, which outlives the cache.

#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace minfer {

class TokenCache {
  public:
    static constexpr std::size_t kMaxWordBytes = 64;  // longer words are rare: not cached
    static constexpr std::size_t kMaxEntries = 1 << 18;

    // Appends the ids cached for `word` to `out`; false when the word is not cached.
    bool find(std::string_view word, std::vector<int32_t>& out) const {
        const auto it = map_.find(word);
        if (it == map_.end()) return false;
        const auto [begin, count] = it->second;
        out.insert(out.end(), ids_.begin() + begin, ids_.begin() + begin + count);
        return true;
    }
    void put(std::string_view word, std::span<const int32_t> ids) {
        if (word.size() > kMaxWordBytes || map_.size() >= kMaxEntries) return;
        map_.emplace(word, std::make_pair(static_cast<uint32_t>(ids_.size()),
                                          static_cast<uint32_t>(ids.size())));
        ids_.insert(ids_.end(), ids.begin(), ids.end());
    }

  private:
    std::unordered_map<std::string_view, std::pair<uint32_t, uint32_t>> map_;  // word -> ids_ range
    std::vector<int32_t> ids_;
};

}  // namespace minfer
