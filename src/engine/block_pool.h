#pragma once
// The blocks of the paged KV cache, as the engine sees them (the memory itself belongs to the
// backend): reference counts, a free list, and the prefix cache.
//
// Prefix cache: a full block whose tokens are known can be registered under its content, which
// is its tokens and the block before it in its sequence (the parent, with the generation it had).
// A later sequence whose prompt starts with the same tokens finds the same chain of blocks and
// shares them instead of computing them again. Matching is exact (tokens compared, parents by
// identity and generation), never by hash alone, so no prompt is ever served another's cache.
// Registered blocks nobody holds stay cached until their memory is needed, least recently used
// first; a block is reallocated with a new generation, so the children registered under its old
// content can no longer be found.

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace minfer {

class BlockPool {
  public:
    static constexpr int32_t kNoBlock = -1;

    BlockPool(int32_t n_blocks, int64_t block_size);

    int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
    int64_t block_size() const { return block_size_; }
    // Blocks that allocate() can return: free ones and cached ones nobody holds.
    int32_t n_available() const { return n_free_ + n_cached_idle_; }
    int32_t n_cached_idle() const { return n_cached_idle_; }

    // A block with one reference: a free one, else the least recently used cached one (dropped
    // from the prefix cache). nullopt when every block is held.
    std::optional<int32_t> allocate();
    void retain(int32_t block);
    // Drops a reference; at zero a registered block stays cached (the most recently used one),
    // any other becomes free.
    void release(int32_t block);
    int32_t references(int32_t block) const { return meta(block).refs; }
    // Registered blocks are immutable: a sequence that must write into one copies it first.
    bool registered(int32_t block) const { return meta(block).registered; }

    // Registers a full block holding `tokens` (block_size of them) after `parent` (kNoBlock for a
    // sequence's first block) and returns it; if the same content is registered already (another
    // sequence computed it too), returns that block instead and registers nothing.
    int32_t register_block(int32_t block, int32_t parent, std::span<const int32_t> tokens);
    // The registered block holding `tokens` after `parent`, if any; it becomes the most recently
    // used. The caller retains it to use it.
    std::optional<int32_t> find(int32_t parent, std::span<const int32_t> tokens);

  private:
    struct Meta {
        int32_t refs = 0;
        uint32_t generation = 0;  // bumped at every allocation
        bool registered = false;
        uint64_t key = 0;
        int32_t parent = kNoBlock;
        uint32_t parent_generation = 0;
        std::vector<int32_t> tokens;
        int32_t lru_prev = kNoBlock, lru_next = kNoBlock;  // in the idle cached list
    };
    Meta& meta(int32_t block);
    const Meta& meta(int32_t block) const;
    uint64_t key_of(int32_t parent, std::span<const int32_t> tokens) const;
    void unregister(int32_t block);
    void lru_push_back(int32_t block);
    void lru_remove(int32_t block);

    int64_t block_size_;
    std::vector<Meta> blocks_;
    std::vector<int32_t> free_;  // unregistered blocks nobody holds
    int32_t n_free_ = 0;
    int32_t n_cached_idle_ = 0;
    int32_t lru_head_ = kNoBlock, lru_tail_ = kNoBlock;  // head: least recently used
    std::unordered_multimap<uint64_t, int32_t> registry_;
};

}  // namespace minfer
