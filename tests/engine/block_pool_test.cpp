// BlockPool, the bookkeeping under the paged KV cache: reference counts, the free list, the
// prefix-cache registry (exact matching of tokens and of the parent with its generation) and the
// least-recently-used eviction of cached blocks nobody holds. Ends with a randomized comparison
// against a plain model of the same rules, checking every count after every call.

#include "engine/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <list>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace minfer {
namespace {

constexpr int32_t kRoot = BlockPool::kNoBlock;

using Tokens = std::vector<int32_t>;

// Allocates until the pool says no.
std::vector<int32_t> allocate_all(BlockPool& pool) {
    std::vector<int32_t> out;
    while (auto b = pool.allocate()) out.push_back(*b);
    return out;
}

// A block holding `tokens` after `parent`, registered, with one reference.
int32_t registered_block(BlockPool& pool, int32_t parent, const Tokens& tokens) {
    const auto b = pool.allocate();
    EXPECT_TRUE(b.has_value());
    pool.register_block(*b, parent, tokens);
    EXPECT_TRUE(pool.registered(*b));
    return *b;
}

// An empty pool or empty blocks are a usage error, not a pool that fails later.
TEST(BlockPool, RejectsAPoolThatHoldsNothing) {
    EXPECT_THROW(BlockPool(0, 16), UsageError);
    EXPECT_THROW(BlockPool(4, 0), UsageError);
    EXPECT_THROW(BlockPool(-1, 16), UsageError);
}

// Every block is handed out exactly once, with one reference, and then allocate() says no.
TEST(BlockPool, AllocatesEveryBlockOnceThenNothing) {
    BlockPool pool(5, 4);
    EXPECT_EQ(pool.n_blocks(), 5);
    EXPECT_EQ(pool.block_size(), 4);
    EXPECT_EQ(pool.n_available(), 5);
    std::set<int32_t> seen;
    for (int i = 0; i < 5; ++i) {
        const auto b = pool.allocate();
        ASSERT_TRUE(b.has_value());
        EXPECT_GE(*b, 0);
        EXPECT_LT(*b, 5);
        EXPECT_TRUE(seen.insert(*b).second) << "block " << *b << " handed out twice";
        EXPECT_EQ(pool.references(*b), 1);
        EXPECT_FALSE(pool.registered(*b));
        EXPECT_EQ(pool.n_available(), 5 - i - 1);
    }
    EXPECT_FALSE(pool.allocate().has_value());
    EXPECT_FALSE(pool.allocate().has_value());  // still nothing, and no state was broken
    EXPECT_EQ(pool.n_available(), 0);
    EXPECT_EQ(pool.n_cached_idle(), 0);
}

// A released unregistered block goes back to the free list and is the one allocated next.
TEST(BlockPool, ReleaseReturnsAnUnregisteredBlockToTheFreeList) {
    BlockPool pool(3, 2);
    const auto blocks = allocate_all(pool);
    ASSERT_EQ(blocks.size(), 3u);
    pool.release(blocks[1]);
    EXPECT_EQ(pool.references(blocks[1]), 0);
    EXPECT_EQ(pool.n_available(), 1);
    EXPECT_EQ(pool.n_cached_idle(), 0);
    const auto again = pool.allocate();
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(*again, blocks[1]);
    EXPECT_EQ(pool.references(*again), 1);
    EXPECT_FALSE(pool.allocate().has_value());
}

// retain/release count references; the block becomes available only at zero.
TEST(BlockPool, BlockIsAvailableOnlyWhenTheLastReferenceIsDropped) {
    BlockPool pool(2, 2);
    const int32_t b = *pool.allocate();
    pool.retain(b);
    pool.retain(b);
    EXPECT_EQ(pool.references(b), 3);
    pool.release(b);
    pool.release(b);
    EXPECT_EQ(pool.references(b), 1);
    EXPECT_EQ(pool.n_available(), 1);  // only the other block
    pool.release(b);
    EXPECT_EQ(pool.references(b), 0);
    EXPECT_EQ(pool.n_available(), 2);
}

// Releasing below zero is a caller bug the pool reports instead of corrupting its free list.
TEST(BlockPool, ReleasingMoreThanRetainedThrows) {
    BlockPool pool(2, 2);
    const int32_t b = *pool.allocate();
    pool.release(b);
    EXPECT_THROW(pool.release(b), UsageError);
    EXPECT_EQ(pool.n_available(), 2);  // the block is on the free list once, not twice
    const auto x = pool.allocate(), y = pool.allocate();
    ASSERT_TRUE(x && y);
    EXPECT_NE(*x, *y);
    EXPECT_FALSE(pool.allocate().has_value());
}

// Block ids outside the pool are refused (the pool indexes its metadata with them).
TEST(BlockPool, UnknownBlockIdsThrow) {
    BlockPool pool(2, 2);
    EXPECT_ANY_THROW(pool.references(2));
    EXPECT_ANY_THROW(pool.retain(-1));
}

// Only a full block can be registered: its content is its block_size tokens.
TEST(BlockPool, OnlyFullBlocksCanBeRegistered) {
    BlockPool pool(2, 3);
    const int32_t b = *pool.allocate();
    EXPECT_THROW(pool.register_block(b, kRoot, Tokens{1, 2}), UsageError);
    EXPECT_THROW(pool.register_block(b, kRoot, Tokens{1, 2, 3, 4}), UsageError);
    EXPECT_FALSE(pool.registered(b));
    pool.register_block(b, kRoot, Tokens{1, 2, 3});
    EXPECT_TRUE(pool.registered(b));
}

// find() is an exact match: one token different anywhere, or a different length, is a miss.
TEST(BlockPool, FindMatchesExactTokensOnly) {
    BlockPool pool(2, 4);
    const int32_t b = registered_block(pool, kRoot, {5, 6, 7, 8});
    EXPECT_EQ(pool.find(kRoot, Tokens{5, 6, 7, 8}), b);
    EXPECT_FALSE(pool.find(kRoot, Tokens{0, 6, 7, 8}));
    EXPECT_FALSE(pool.find(kRoot, Tokens{5, 6, 7, 9}));
    EXPECT_FALSE(pool.find(kRoot, Tokens{5, 7, 6, 8}));
    EXPECT_FALSE(pool.find(kRoot, Tokens{5, 6, 7}));
    EXPECT_FALSE(pool.find(kRoot, Tokens{5, 6, 7, 8, 9}));
    EXPECT_FALSE(pool.find(kRoot, Tokens{}));
}

// The parent is part of the content: the same tokens after another block (or at the start of a
// sequence) are a different block, because their keys and values depend on what came before.
TEST(BlockPool, FindMatchesTheParentToo) {
    BlockPool pool(4, 2);
    const int32_t a = registered_block(pool, kRoot, {1, 2});
    const int32_t other = registered_block(pool, kRoot, {3, 4});
    const int32_t child = registered_block(pool, a, {5, 6});
    EXPECT_EQ(pool.find(a, Tokens{5, 6}), child);
    EXPECT_FALSE(pool.find(other, Tokens{5, 6}));
    EXPECT_FALSE(pool.find(kRoot, Tokens{5, 6}));
    EXPECT_FALSE(pool.find(child, Tokens{5, 6}));
}

// Registering content that is registered already keeps the first block: the second stays an
// ordinary block that goes back to the free list, not into the cache.
TEST(BlockPool, RegisteringKnownContentKeepsTheFirstBlock) {
    BlockPool pool(3, 2);
    const int32_t first = registered_block(pool, kRoot, {1, 2});
    const int32_t second = *pool.allocate();
    pool.register_block(second, kRoot, Tokens{1, 2});
    EXPECT_FALSE(pool.registered(second));
    EXPECT_EQ(pool.find(kRoot, Tokens{1, 2}), first);
    pool.release(second);
    EXPECT_EQ(pool.n_cached_idle(), 0);
    pool.release(first);
    EXPECT_EQ(pool.n_cached_idle(), 1);
    EXPECT_EQ(pool.n_available(), 3);
}

// A registered block keeps its content: registering it again under other tokens is ignored.
TEST(BlockPool, ARegisteredBlockIsNotRegisteredAgain) {
    BlockPool pool(2, 2);
    const int32_t b = registered_block(pool, kRoot, {1, 2});
    pool.register_block(b, kRoot, Tokens{3, 4});
    EXPECT_EQ(pool.find(kRoot, Tokens{1, 2}), b);
    EXPECT_FALSE(pool.find(kRoot, Tokens{3, 4}));
}

// A registered block nobody holds stays in the cache: findable, counted as available and as
// cached idle; retaining it takes it out of the idle count without a new allocation.
TEST(BlockPool, ReleasedRegisteredBlockStaysCached) {
    BlockPool pool(2, 2);
    const int32_t b = registered_block(pool, kRoot, {1, 2});
    pool.release(b);
    EXPECT_TRUE(pool.registered(b));
    EXPECT_EQ(pool.references(b), 0);
    EXPECT_EQ(pool.n_cached_idle(), 1);
    EXPECT_EQ(pool.n_available(), 2);
    ASSERT_EQ(pool.find(kRoot, Tokens{1, 2}), b);
    EXPECT_EQ(pool.references(b), 0);  // find alone takes no reference
    pool.retain(b);
    EXPECT_EQ(pool.references(b), 1);
    EXPECT_EQ(pool.n_cached_idle(), 0);
    EXPECT_EQ(pool.n_available(), 1);
    // Held again, it cannot be evicted: the only allocation left is the free block.
    const auto other = pool.allocate();
    ASSERT_TRUE(other.has_value());
    EXPECT_NE(*other, b);
    EXPECT_FALSE(pool.allocate().has_value());
    EXPECT_EQ(pool.find(kRoot, Tokens{1, 2}), b);
}

// Free blocks are used before any cached one is evicted.
TEST(BlockPool, AllocatePrefersFreeBlocksToCachedOnes) {
    BlockPool pool(3, 2);
    const int32_t cached = registered_block(pool, kRoot, {1, 2});
    pool.release(cached);
    const auto x = pool.allocate(), y = pool.allocate();
    ASSERT_TRUE(x && y);
    EXPECT_NE(*x, cached);
    EXPECT_NE(*y, cached);
    EXPECT_EQ(pool.find(kRoot, Tokens{1, 2}), cached);
    EXPECT_EQ(pool.n_cached_idle(), 1);
    // Now the cached block is the only one left: it is evicted and leaves the registry.
    EXPECT_EQ(pool.allocate(), cached);
    EXPECT_FALSE(pool.registered(cached));
    EXPECT_EQ(pool.references(cached), 1);
    EXPECT_EQ(pool.n_cached_idle(), 0);
    EXPECT_FALSE(pool.find(kRoot, Tokens{1, 2}));
    EXPECT_FALSE(pool.allocate().has_value());
}

// Under pressure the idle cached blocks go least recently released first.
TEST(BlockPool, EvictsTheLeastRecentlyUsedCachedBlockFirst) {
    BlockPool pool(3, 1);
    const int32_t a = registered_block(pool, kRoot, {1});
    const int32_t b = registered_block(pool, kRoot, {2});
    const int32_t c = registered_block(pool, kRoot, {3});
    pool.release(b);
    pool.release(c);
    pool.release(a);  // order of use: b, c, a
    EXPECT_EQ(pool.n_cached_idle(), 3);
    EXPECT_EQ(pool.allocate(), b);
    EXPECT_FALSE(pool.find(kRoot, Tokens{2}));
    EXPECT_EQ(pool.find(kRoot, Tokens{3}), c);  // (moves c after a)
    EXPECT_EQ(pool.allocate(), a);
    EXPECT_EQ(pool.allocate(), c);
    EXPECT_FALSE(pool.allocate().has_value());
    EXPECT_EQ(pool.n_cached_idle(), 0);
}

// A block that find() returns becomes the most recently used, so it outlives the others.
TEST(BlockPool, FoundBlockBecomesMostRecentlyUsed) {
    BlockPool pool(3, 1);
    const int32_t a = registered_block(pool, kRoot, {1});
    const int32_t b = registered_block(pool, kRoot, {2});
    const int32_t c = registered_block(pool, kRoot, {3});
    pool.release(a);
    pool.release(b);
    pool.release(c);
    ASSERT_EQ(pool.find(kRoot, Tokens{1}), a);  // order now: b, c, a
    EXPECT_EQ(pool.allocate(), b);
    EXPECT_EQ(pool.allocate(), c);
    EXPECT_EQ(pool.find(kRoot, Tokens{1}), a);
    EXPECT_EQ(pool.allocate(), a);
}

// Retaining an idle cached block (the middle of the LRU list) unlinks it properly: the others
// are still evicted in order and it is never handed out while held.
TEST(BlockPool, RetainedCachedBlockLeavesTheLruList) {
    BlockPool pool(3, 1);
    const int32_t a = registered_block(pool, kRoot, {1});
    const int32_t b = registered_block(pool, kRoot, {2});
    const int32_t c = registered_block(pool, kRoot, {3});
    pool.release(a);
    pool.release(b);
    pool.release(c);
    pool.retain(b);
    EXPECT_EQ(pool.n_cached_idle(), 2);
    EXPECT_EQ(pool.allocate(), a);
    EXPECT_EQ(pool.allocate(), c);
    EXPECT_FALSE(pool.allocate().has_value());
    EXPECT_EQ(pool.find(kRoot, Tokens{2}), b);
    pool.release(b);  // back to the cache, now the only idle block
    EXPECT_EQ(pool.n_cached_idle(), 1);
    EXPECT_EQ(pool.allocate(), b);
}

// A block that is evicted and allocated again gets a new generation, so the children registered
// after its old content cannot be found through it, even when the same content is registered in
// it again (the child's keys and values were computed after the old block's memory).
TEST(BlockPool, ChildrenOfAnEvictedParentAreNotFound) {
    BlockPool pool(2, 2);
    const int32_t parent = registered_block(pool, kRoot, {1, 2});
    const int32_t child = registered_block(pool, parent, {3, 4});
    pool.release(parent);
    pool.release(child);                                // the parent is the least recently used
    ASSERT_EQ(pool.find(parent, Tokens{3, 4}), child);  // (child is the most recent anyway)
    ASSERT_EQ(pool.allocate(), parent);                 // evicted
    EXPECT_TRUE(pool.registered(child));                // the child itself is still cached
    EXPECT_FALSE(pool.find(parent, Tokens{3, 4}));
    pool.register_block(parent, kRoot, Tokens{1, 2});  // same content, new memory
    EXPECT_EQ(pool.find(kRoot, Tokens{1, 2}), parent);
    EXPECT_FALSE(pool.find(parent, Tokens{3, 4}));
    // The stale child still takes its turn in eviction and then is gone for good.
    EXPECT_EQ(pool.n_cached_idle(), 1);
    EXPECT_EQ(pool.allocate(), child);
    EXPECT_FALSE(pool.registered(child));
}

// A freed (unregistered) block that is allocated again also gets a new generation.
TEST(BlockPool, ReallocatedFreeParentHidesItsChildren) {
    BlockPool pool(2, 2);
    const int32_t parent = *pool.allocate();  // never registered (e.g. a duplicate)
    const int32_t child = registered_block(pool, parent, {3, 4});
    EXPECT_EQ(pool.find(parent, Tokens{3, 4}), child);
    pool.release(parent);
    EXPECT_EQ(pool.allocate(), parent);
    EXPECT_FALSE(pool.find(parent, Tokens{3, 4}));
}

// ---- randomized comparison with a model ----

// The pool's rules, written plainly: reference counts, a registry of (parent, parent
// generation, tokens) -> block, the LRU order of idle cached blocks, generations.
struct PoolModel {
    struct Block {
        int32_t refs = 0;
        uint32_t generation = 0;
        bool registered = false;
        std::tuple<int32_t, uint32_t, Tokens> key;
    };
    std::vector<Block> blocks;
    std::map<std::tuple<int32_t, uint32_t, Tokens>, int32_t> registry;
    std::list<int32_t> lru;  // front: least recently used

    explicit PoolModel(int32_t n) : blocks(static_cast<std::size_t>(n)) {}
    Block& at(int32_t b) { return blocks[static_cast<std::size_t>(b)]; }
    uint32_t generation_of(int32_t parent) { return parent == kRoot ? 0 : at(parent).generation; }
    int32_t n_free() const {
        return static_cast<int32_t>(std::count_if(blocks.begin(), blocks.end(), [](const Block& b) {
            return b.refs == 0 && !b.registered;
        }));
    }
};

// Random calls, each checked against the model: which block allocate() may return (a free one
// while there is one, else exactly the LRU head), what find() returns, and every count.
TEST(BlockPool, RandomOperationsMatchAModel) {
    constexpr int32_t kBlocks = 12;
    constexpr int64_t kSize = 2;
    for (unsigned seed = 1; seed <= 4; ++seed) {
        std::mt19937 rng(seed);
        BlockPool pool(kBlocks, kSize);
        PoolModel model(kBlocks);
        std::vector<int32_t> held;  // one entry per reference we hold
        const auto pick = [&](std::size_t n) {
            return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
        };
        const auto random_tokens = [&] {
            Tokens t(kSize);
            for (auto& x : t) x = static_cast<int32_t>(pick(2));
            return t;
        };
        // The root or a registered block: what PagedKvCache registers after (an unregistered
        // parent is the subject of ReallocatedFreeParentHidesItsChildren).
        const auto random_parent = [&] {
            std::vector<int32_t> registered;
            for (int32_t b = 0; b < kBlocks; ++b)
                if (model.at(b).registered) registered.push_back(b);
            return registered.empty() || pick(3) == 0 ? kRoot : registered[pick(registered.size())];
        };
        for (int step = 0; step < 3000; ++step) {
            SCOPED_TRACE(::testing::Message() << "seed " << seed << " step " << step);
            switch (pick(6)) {
                case 0: {  // allocate
                    const auto got = pool.allocate();
                    const int32_t n_free = model.n_free();
                    if (n_free == 0 && model.lru.empty()) {
                        ASSERT_FALSE(got.has_value());
                        break;
                    }
                    ASSERT_TRUE(got.has_value());
                    auto& m = model.at(*got);
                    if (n_free > 0) {
                        ASSERT_TRUE(m.refs == 0 && !m.registered) << "not a free block: " << *got;
                    } else {
                        ASSERT_EQ(*got, model.lru.front()) << "not the least recently used";
                        model.lru.pop_front();
                        model.registry.erase(m.key);
                        m.registered = false;
                    }
                    m.refs = 1;
                    ++m.generation;
                    held.push_back(*got);
                    break;
                }
                case 1: {  // retain a held block, or an idle cached one found in the registry
                    if (held.empty()) break;
                    const int32_t b = held[pick(held.size())];
                    pool.retain(b);
                    ++model.at(b).refs;
                    held.push_back(b);
                    break;
                }
                case 2:
                case 3: {  // release
                    if (held.empty()) break;
                    const std::size_t i = pick(held.size());
                    const int32_t b = held[i];
                    held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
                    pool.release(b);
                    auto& m = model.at(b);
                    if (--m.refs == 0 && m.registered) model.lru.push_back(b);
                    break;
                }
                case 4: {  // register a held block (full content) after a random parent
                    if (held.empty()) break;
                    const int32_t b = held[pick(held.size())];
                    const int32_t parent = random_parent();
                    const Tokens tokens = random_tokens();
                    pool.register_block(b, parent, tokens);
                    auto& m = model.at(b);
                    auto key = std::make_tuple(parent, model.generation_of(parent), tokens);
                    if (m.registered) break;  // no-op, without even a lookup
                    const auto known = model.registry.find(key);
                    if (known != model.registry.end() && model.at(known->second).refs == 0) {
                        model.lru.remove(known->second);  // the lookup counts as a use
                        model.lru.push_back(known->second);
                    }
                    if (known == model.registry.end()) {
                        m.registered = true;
                        m.key = key;
                        model.registry.emplace(std::move(key), b);
                    }
                    break;
                }
                case 5: {  // find, and sometimes take the found block
                    const int32_t parent = random_parent();
                    const Tokens tokens = random_tokens();
                    const auto got = pool.find(parent, tokens);
                    const auto known = model.registry.find(
                        std::make_tuple(parent, model.generation_of(parent), tokens));
                    if (known == model.registry.end()) {
                        ASSERT_FALSE(got.has_value());
                        break;
                    }
                    ASSERT_EQ(got, known->second);
                    auto& m = model.at(*got);
                    if (m.refs == 0) {
                        model.lru.remove(*got);
                        model.lru.push_back(*got);
                    }
                    if (pick(2) == 0) {
                        pool.retain(*got);
                        if (m.refs++ == 0) model.lru.remove(*got);
                        held.push_back(*got);
                    }
                    break;
                }
            }
            // Every count, after every call.
            int32_t idle = 0, available = 0;
            for (int32_t b = 0; b < kBlocks; ++b) {
                const auto& m = model.at(b);
                ASSERT_EQ(pool.references(b), m.refs) << "block " << b;
                ASSERT_EQ(pool.registered(b), m.registered) << "block " << b;
                available += m.refs == 0;
                idle += m.refs == 0 && m.registered;
            }
            ASSERT_EQ(pool.n_available(), available);
            ASSERT_EQ(pool.n_cached_idle(), idle);
            ASSERT_EQ(static_cast<std::size_t>(idle), model.lru.size());
        }
    }
}

}  // namespace
}  // namespace minfer
