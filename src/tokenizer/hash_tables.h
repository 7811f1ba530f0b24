#pragma once
// Two small open-addressing hash tables for the vocabulary: text -> id (the texts live elsewhere,
// the table stores only ids and hashes) and (left, right) symbol pair -> BPE merge. Both are
// flat arrays filled once at load time: far fewer allocations than std::unordered_map, which
// keeps loading a 150,000-token vocabulary fast.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace minfer {

inline std::size_t table_capacity_for(std::size_t n) {
    return std::bit_ceil(n + n / 2 + 16);  // load factor <= 2/3
}

// Maps texts to ids. `key_of(id)` returns the text of an id already stored.
class TextIdTable {
  public:
    explicit TextIdTable(std::size_t expected = 0) { rehash(table_capacity_for(expected)); }

    template <class KeyOf>
    int32_t find(std::string_view key, const KeyOf& key_of) const {
        const uint32_t h = hash(key);
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.id < 0) return -1;
            if (s.hash == h && key_of(s.id) == key) return s.id;
        }
    }

    // Stores key -> id; an existing equal key is overwritten (the later id wins).
    template <class KeyOf>
    void assign(std::string_view key, int32_t id, const KeyOf& key_of) {
        if ((size_ + 1) * 3 > slots_.size() * 2) grow(key_of);
        const uint32_t h = hash(key);
        for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.id < 0) {
                s = Slot{h, id};
                ++size_;
                return;
            }
            if (s.hash == h && key_of(s.id) == key) {
                s.id = id;
                return;
            }
        }
    }

    std::size_t size() const { return size_; }

  private:
    struct Slot {
        uint32_t hash = 0;
        int32_t id = -1;
    };
    static uint32_t hash(std::string_view key) {
        const std::size_t h = std::hash<std::string_view>{}(key);
        return static_cast<uint32_t>(h ^ (h >> 32));
    }
    void rehash(std::size_t capacity) {
        slots_.assign(capacity, Slot{});
        mask_ = capacity - 1;
        size_ = 0;
    }
    template <class KeyOf>
    void grow(const KeyOf& key_of) {
        std::vector<Slot> old = std::move(slots_);
        rehash(old.size() * 2);
        for (const Slot& s : old) {
            if (s.id >= 0) assign(key_of(s.id), s.id, key_of);
        }
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    std::size_t size_ = 0;
};

// Maps a pair of BPE symbol ids to the merge that joins them: its rank (lower merges first) and
// the symbol id of the joined text.
class MergeTable {
  public:
    struct Merge {
        int32_t rank = -1;
        int32_t result = -1;
    };

    explicit MergeTable(std::size_t expected = 0) : slots_(table_capacity_for(expected)) {
        mask_ = slots_.size() - 1;
    }

    // Keeps the first merge given for a pair (as llama.cpp's std::map::emplace does).
    void insert_if_absent(int32_t left, int32_t right, Merge merge) {
        if ((size_ + 1) * 3 > slots_.size() * 2) grow();
        const uint64_t key = pack(left, right);
        for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.merge.rank < 0) {
                s = Slot{key, merge};
                ++size_;
                return;
            }
            if (s.key == key) return;
        }
    }

    Merge find(int32_t left, int32_t right) const {
        const uint64_t key = pack(left, right);
        for (std::size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
            const Slot& s = slots_[i];
            if (s.merge.rank < 0 || s.key == key) return s.merge;
        }
    }

    std::size_t size() const { return size_; }

  private:
    struct Slot {
        uint64_t key = 0;
        Merge merge;
    };
    static uint64_t pack(int32_t left, int32_t right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
               static_cast<uint32_t>(right);
    }
    static std::size_t hash(uint64_t key) {
        key ^= key >> 33;
        key *= 0xff51afd7ed558ccdULL;
        key ^= key >> 33;
        return static_cast<std::size_t>(key);
    }
    void grow() {
        std::vector<Slot> old = std::move(slots_);
        slots_.assign(old.size() * 2, Slot{});
        mask_ = slots_.size() - 1;
        size_ = 0;
        for (const Slot& s : old) {
            if (s.merge.rank >= 0) {
                insert_if_absent(static_cast<int32_t>(s.key >> 32),
                                 static_cast<int32_t>(s.key & 0xFFFFFFFFu), s.merge);
            }
        }
    }

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    std::size_t size_ = 0;
};

}  // namespace minfer
