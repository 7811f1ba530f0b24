#pragma once
// The sequences of the paged KV cache: each one a block table over the BlockPool and the tokens
// at its positions. Blocks are shared by reference count: a fork shares all of its source's
// blocks, the prefix cache shares blocks between unrelated sequences with the same beginning,
// and a sequence about to write into a shared or registered block copies it first (copy on
// write; the copy itself is the backend's, so reserve() returns the copies to make).
//
// A sequence's length is the number of positions whose K and V are stored. The engine reserves
// positions before a forward pass writes them and commits them after.
//
// Sliding windows: when every layer of the model attends only to the last `window` positions,
// a block all of whose positions are older than the window of the next position to compute is
// unreachable: commit() frees it (it goes to the prefix cache if registered, else back to the
// pool) and its entry in the block table becomes kFreed. A long sequence then holds about
// window / block_size + 1 blocks, not length / block_size.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"

namespace minfer {

using SeqId = int64_t;

struct BlockCopy {
    int32_t from, to;
    int64_t n_positions;  // the first positions of `from` that hold data
};

class PagedKvCache {
  public:
    static constexpr int32_t kFreed = -1;  // a block-table entry freed by the sliding window

    // window: the sliding window of every layer (0: some layer sees all earlier positions).
    PagedKvCache(int32_t n_blocks, int64_t block_size, int64_t window = 0);

    int64_t block_size() const { return pool_.block_size(); }
    int64_t window() const { return window_; }
    const BlockPool& pool() const { return pool_; }

    SeqId add();
    // A new sequence holding the same positions as `source` (blocks shared until written).
    SeqId fork(SeqId source);
    void remove(SeqId seq);
    bool contains(SeqId seq) const { return sequences_.count(seq) != 0; }
    // Keeps positions [0, n) (n <= length): later writes replace the rest. When the window has
    // freed blocks that position n would attend to, they cannot be recomputed from what is left
    // (every layer's keys depend on the positions before them): the sequence is emptied instead.
    // Returns the length kept.
    int64_t truncate(SeqId seq, int64_t n);

    int64_t length(SeqId seq) const { return at(seq).tokens.size(); }
    std::span<const int32_t> tokens(SeqId seq) const { return at(seq).tokens; }
    // Blocks by position / block_size; kFreed for blocks the sliding window freed.
    std::span<const int32_t> block_table(SeqId seq) const { return at(seq).blocks; }
    // Blocks the sequence holds (not counting the freed ones).
    int64_t blocks_held(SeqId seq) const;
    int32_t slot(SeqId seq, int64_t pos) const;

    // Attaches registered blocks holding the next tokens: while the sequence's length is a whole
    // number of blocks and prompt[length .. length + block_size) is in the prefix cache, those
    // positions are taken from it. Positions at or beyond `limit` are not taken (the engine keeps
    // the last prompt token to compute its logits). Returns the positions attached.
    int64_t attach_cached_prefix(SeqId seq, std::span<const int32_t> prompt, int64_t limit);

    // Makes positions [length, length + n) writable: blocks allocated as needed, a shared or
    // registered block that they fall into replaced by a copy (appended to `copies`, to be made
    // before the writes). Returns false, changing nothing the sequence holds, when the pool has
    // too few blocks left.
    bool reserve(SeqId seq, int64_t n, std::vector<BlockCopy>& copies);
    // Records that positions [length, length + tokens.size()) were written with `tokens`,
    // registers the blocks this completes in the prefix cache and frees the blocks the sliding
    // window leaves behind.
    void commit(SeqId seq, std::span<const int32_t> tokens);
    // Blocks that reserving n more positions of `seq` would take from the pool.
    int64_t blocks_needed(SeqId seq, int64_t n) const;

    // Positions taken from the prefix cache, over the lifetime of this cache.
    int64_t prefix_hits() const { return prefix_hits_; }

  private:
    struct Sequence {
        std::vector<int32_t> blocks;  // covers at least positions 0 .. length-1
        std::vector<int32_t> tokens;  // [length]
        int64_t registered = 0;       // leading blocks registered (or taken from the cache)
        int64_t freed = 0;            // leading blocks freed by the window (entries kFreed)
    };
    Sequence& at(SeqId seq);
    const Sequence& at(SeqId seq) const;
    void register_full_blocks(Sequence& s);
    void free_behind_window(Sequence& s);
    void release_held(Sequence& s);  // drops the references of every block it holds

    BlockPool pool_;
    int64_t window_ = 0;
    std::unordered_map<SeqId, Sequence> sequences_;
    SeqId next_id_ = 1;
    int64_t prefix_hits_ = 0;
};

}  // namespace minfer
