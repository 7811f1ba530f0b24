#include "engine/paged_kv_cache.h"

#include <algorithm>

#include "core/error.h"

namespace minfer {

PagedKvCache::PagedKvCache(int32_t n_blocks, int64_t block_size, int64_t window)
    : pool_(n_blocks, block_size), window_(window) {
    if (window < 0) throw UsageError(concat("a sliding window of ", window, " positions"));
}

PagedKvCache::Sequence& PagedKvCache::at(SeqId seq) {
    const auto it = sequences_.find(seq);
    if (it == sequences_.end()) throw UsageError(concat("sequence ", seq, " does not exist"));
    return it->second;
}

const PagedKvCache::Sequence& PagedKvCache::at(SeqId seq) const {
    const auto it = sequences_.find(seq);
    if (it == sequences_.end()) throw UsageError(concat("sequence ", seq, " does not exist"));
    return it->second;
}

SeqId PagedKvCache::add() {
    const SeqId id = next_id_++;
    sequences_.emplace(id, Sequence{});
    return id;
}

SeqId PagedKvCache::fork(SeqId source) {
    Sequence copy = at(source);
    // Blocks beyond the length hold nothing yet: the fork reserves its own.
    copy.blocks.resize(static_cast<std::size_t>(
        (static_cast<int64_t>(copy.tokens.size()) + block_size() - 1) / block_size()));
    for (int32_t b : copy.blocks) {
        if (b != kFreed) pool_.retain(b);
    }
    const SeqId id = next_id_++;
    sequences_.emplace(id, std::move(copy));
    return id;
}

void PagedKvCache::release_held(Sequence& s) {
    // The last blocks first: the sequence's first blocks end up the most recently used in the
    // prefix cache, so eviction takes the ends of cached prompts before their beginnings.
    for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) {
        if (*it != kFreed) pool_.release(*it);
    }
    s.blocks.clear();
}

void PagedKvCache::remove(SeqId seq) {
    release_held(at(seq));
    sequences_.erase(seq);
}

int64_t PagedKvCache::truncate(SeqId seq, int64_t n) {
    Sequence& s = at(seq);
    if (n < 0 || n > static_cast<int64_t>(s.tokens.size()))
        throw UsageError(
            concat("cannot truncate sequence ", seq, " of ", s.tokens.size(), " positions to ", n));
    const int64_t first_needed = window_ > 0 ? std::max<int64_t>(0, n - window_ + 1) : 0;
    if (n > 0 && first_needed / block_size() < s.freed) n = 0;
    s.tokens.resize(static_cast<std::size_t>(n));
    if (n == 0) {
        release_held(s);
        s.freed = 0;
    }
    const auto keep = static_cast<std::size_t>((n + block_size() - 1) / block_size());
    while (s.blocks.size() > keep) {
        pool_.release(s.blocks.back());
        s.blocks.pop_back();
    }
    s.registered = std::min<int64_t>(s.registered, n / block_size());
    return n;
}

int64_t PagedKvCache::blocks_held(SeqId seq) const {
    const Sequence& s = at(seq);
    return static_cast<int64_t>(s.blocks.size()) - s.freed;
}

int32_t PagedKvCache::slot(SeqId seq, int64_t pos) const {
    const Sequence& s = at(seq);
    const auto index = static_cast<std::size_t>(pos / block_size());
    if (pos < 0 || index >= s.blocks.size() || s.blocks[index] == kFreed)
        throw UsageError(concat("position ", pos, " of sequence ", seq, " has no block"));
    return static_cast<int32_t>(s.blocks[index] * block_size() + pos % block_size());
}

int64_t PagedKvCache::attach_cached_prefix(SeqId seq, std::span<const int32_t> prompt,
                                           int64_t limit) {
    Sequence& s = at(seq);
    const int64_t b = block_size();
    int64_t attached = 0;
    while (true) {
        const auto length = static_cast<int64_t>(s.tokens.size());
        if (length % b != 0 || length + b > limit ||
            length + b > static_cast<int64_t>(prompt.size()))
            break;
        // Blocks reserved beyond the length would be replaced; only attach onto a clean end.
        if (static_cast<int64_t>(s.blocks.size()) != length / b) break;
        const int32_t parent = s.blocks.empty() ? BlockPool::kNoBlock : s.blocks.back();
        // A freed block may have been reallocated since: it names no content any more.
        if (!s.blocks.empty() && s.blocks.back() == kFreed) break;
        const auto next =
            prompt.subspan(static_cast<std::size_t>(length), static_cast<std::size_t>(b));
        const auto found = pool_.find(parent, next);
        if (!found) break;
        pool_.retain(*found);
        s.blocks.push_back(*found);
        s.tokens.insert(s.tokens.end(), next.begin(), next.end());
        s.registered = static_cast<int64_t>(s.blocks.size());
        attached += b;
    }
    prefix_hits_ += attached;
    return attached;
}

int64_t PagedKvCache::blocks_needed(SeqId seq, int64_t n) const {
    const Sequence& s = at(seq);
    const int64_t b = block_size();
    const auto length = static_cast<int64_t>(s.tokens.size());
    const int64_t have = static_cast<int64_t>(s.blocks.size());
    int64_t needed = std::max<int64_t>(0, (length + n + b - 1) / b - have);
    // The block the first new position falls into, if shared: one copy.
    if (n > 0 && length / b < have) {
        const int32_t block = s.blocks[static_cast<std::size_t>(length / b)];
        if (pool_.references(block) > 1 || pool_.registered(block)) ++needed;
    }
    return needed;
}

bool PagedKvCache::reserve(SeqId seq, int64_t n, std::vector<BlockCopy>& copies) {
    Sequence& s = at(seq);
    if (n <= 0) return true;
    if (blocks_needed(seq, n) > pool_.n_available()) return false;
    const int64_t b = block_size();
    const auto length = static_cast<int64_t>(s.tokens.size());
    if (length / b < static_cast<int64_t>(s.blocks.size())) {
        int32_t& block = s.blocks[static_cast<std::size_t>(length / b)];
        if (pool_.references(block) > 1 || pool_.registered(block)) {
            const int32_t copy = *pool_.allocate();
            copies.push_back(BlockCopy{block, copy, length % b});
            pool_.release(block);
            block = copy;
        }
    }
    while (static_cast<int64_t>(s.blocks.size()) * b < length + n)
        s.blocks.push_back(*pool_.allocate());
    return true;
}

void PagedKvCache::commit(SeqId seq, std::span<const int32_t> tokens) {
    Sequence& s = at(seq);
    if (static_cast<int64_t>(s.tokens.size() + tokens.size()) >
        static_cast<int64_t>(s.blocks.size()) * block_size())
        throw UsageError(concat("sequence ", seq, ": positions committed without a block"));
    s.tokens.insert(s.tokens.end(), tokens.begin(), tokens.end());
    register_full_blocks(s);
    free_behind_window(s);
}

void PagedKvCache::free_behind_window(Sequence& s) {
    if (window_ == 0) return;
    // The next position, `length`, attends to [length - window + 1, length]: the blocks wholly
    // before that are not read again.
    const int64_t first_needed =
        std::max<int64_t>(0, static_cast<int64_t>(s.tokens.size()) - window_ + 1);
    const int64_t unreachable = first_needed / block_size();
    for (; s.freed < unreachable; ++s.freed) {
        int32_t& block = s.blocks[static_cast<std::size_t>(s.freed)];
        pool_.release(block);
        block = kFreed;
    }
}

void PagedKvCache::register_full_blocks(Sequence& s) {
    const int64_t b = block_size();
    const int64_t full = static_cast<int64_t>(s.tokens.size()) / b;
    for (; s.registered < full; ++s.registered) {
        const auto i = static_cast<std::size_t>(s.registered);
        const int32_t parent = i == 0 ? BlockPool::kNoBlock : s.blocks[i - 1];
        // The window freed the parent (it may hold other content by now): the chain of cached
        // blocks ends there.
        if (i > 0 && s.blocks[i - 1] == kFreed) break;
        const int32_t cached =
            pool_.register_block(s.blocks[i], parent,
                                 std::span(s.tokens).subspan(i * static_cast<std::size_t>(b),
                                                             static_cast<std::size_t>(b)));
        // Another sequence registered the same content first (both computed it): take its block
        // and free ours. Every block before `registered` is then a registered one, so blocks
        // registered after it hang off an immutable parent; an unregistered parent could be
        // rewritten in place after a truncate and serve its stale children to another prompt.
        if (cached != s.blocks[i]) {
            pool_.retain(cached);
            pool_.release(s.blocks[i]);
            s.blocks[i] = cached;
        }
    }
}

}  // namespace minfer
