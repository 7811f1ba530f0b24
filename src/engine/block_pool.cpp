#include "engine/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace minfer {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    // splitmix64's finalizer over the running state: good spreading for a hash table key.
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 27;
    h *= 0x94D049BB133111EBull;
    return h ^ (h >> 31);
}

}  // namespace

BlockPool::BlockPool(int32_t n_blocks, int64_t block_size) : block_size_(block_size) {
    if (n_blocks < 1 || block_size < 1)
        throw UsageError(concat("a KV cache of ", n_blocks, " blocks of ", block_size,
                                " positions holds nothing"));
    blocks_.resize(static_cast<std::size_t>(n_blocks));
    free_.reserve(static_cast<std::size_t>(n_blocks));
    for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);
    n_free_ = n_blocks;
}

BlockPool::Meta& BlockPool::meta(int32_t block) {
    return blocks_.at(static_cast<std::size_t>(block));
}
const BlockPool::Meta& BlockPool::meta(int32_t block) const {
    return blocks_.at(static_cast<std::size_t>(block));
}

std::optional<int32_t> BlockPool::allocate() {
    int32_t block = kNoBlock;
    if (!free_.empty()) {
        block = free_.back();
        free_.pop_back();
        --n_free_;
    } else if (lru_head_ != kNoBlock) {
        block = lru_head_;
        lru_remove(block);
        --n_cached_idle_;
        unregister(block);
    } else {
        return std::nullopt;
    }
    Meta& m = meta(block);
    m.refs = 1;
    ++m.generation;
    return block;
}

void BlockPool::retain(int32_t block) {
    Meta& m = meta(block);
    if (m.refs == 0) {
        // An idle cached block comes back into use.
        lru_remove(block);
        --n_cached_idle_;
    }
    ++m.refs;
}

void BlockPool::release(int32_t block) {
    Meta& m = meta(block);
    if (m.refs < 1) throw UsageError(concat("KV block ", block, " released more than retained"));
    if (--m.refs > 0) return;
    if (m.registered) {
        lru_push_back(block);
        ++n_cached_idle_;
    } else {
        free_.push_back(block);
        ++n_free_;
    }
}

uint64_t BlockPool::key_of(int32_t parent, std::span<const int32_t> tokens) const {
    uint64_t h = mix(0, static_cast<uint64_t>(static_cast<uint32_t>(parent)));
    if (parent != kNoBlock) h = mix(h, meta(parent).generation);
    for (int32_t t : tokens) h = mix(h, static_cast<uint32_t>(t));
    return h;
}

int32_t BlockPool::register_block(int32_t block, int32_t parent, std::span<const int32_t> tokens) {
    if (static_cast<int64_t>(tokens.size()) != block_size_)
        throw UsageError("only full KV blocks can be registered");
    Meta& m = meta(block);
    if (m.registered) return block;
    if (const auto existing = find(parent, tokens)) return *existing;
    m.registered = true;
    m.key = key_of(parent, tokens);
    m.parent = parent;
    m.parent_generation = parent == kNoBlock ? 0 : meta(parent).generation;
    m.tokens.assign(tokens.begin(), tokens.end());
    registry_.emplace(m.key, block);
    return block;
}

std::optional<int32_t> BlockPool::find(int32_t parent, std::span<const int32_t> tokens) {
    const uint64_t key = key_of(parent, tokens);
    const uint32_t parent_generation = parent == kNoBlock ? 0 : meta(parent).generation;
    auto [begin, end] = registry_.equal_range(key);
    for (auto it = begin; it != end; ++it) {
        Meta& m = meta(it->second);
        if (m.parent != parent || m.parent_generation != parent_generation ||
            !std::equal(m.tokens.begin(), m.tokens.end(), tokens.begin(), tokens.end()))
            continue;
        if (m.refs == 0) {  // most recently used now
            lru_remove(it->second);
            lru_push_back(it->second);
        }
        return it->second;
    }
    return std::nullopt;
}

void BlockPool::unregister(int32_t block) {
    Meta& m = meta(block);
    if (!m.registered) return;
    auto [begin, end] = registry_.equal_range(m.key);
    for (auto it = begin; it != end; ++it) {
        if (it->second == block) {
            registry_.erase(it);
            break;
        }
    }
    m.registered = false;
    m.tokens.clear();
}

void BlockPool::lru_push_back(int32_t block) {
    Meta& m = meta(block);
    m.lru_prev = lru_tail_;
    m.lru_next = kNoBlock;
    if (lru_tail_ != kNoBlock) meta(lru_tail_).lru_next = block;
    lru_tail_ = block;
    if (lru_head_ == kNoBlock) lru_head_ = block;
}

void BlockPool::lru_remove(int32_t block) {
    Meta& m = meta(block);
    if (m.lru_prev != kNoBlock)
        meta(m.lru_prev).lru_next = m.lru_next;
    else
        lru_head_ = m.lru_next;
    if (m.lru_next != kNoBlock)
        meta(m.lru_next).lru_prev = m.lru_prev;
    else
        lru_tail_ = m.lru_prev;
    m.lru_prev = m.lru_next = kNoBlock;
}

}  // namespace minfer
