// WorkRanges: every item processed exactly once, whatever the threads' speeds; a thread's own
// share in order, a chunk at a time; the slow thread's work taken by the others.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "core/work_ranges.h"

namespace minfer {
namespace {

struct Piece {
    int64_t begin, end;
};

// Runs WorkRanges(count, n) on a pool of n threads; thread `slow` sleeps on each piece. Returns
// each thread's pieces in the order it got them.
std::vector<std::vector<Piece>> run_ranges(int64_t count, int n, int64_t chunk, int slow,
                                           std::vector<std::atomic<int>>& seen) {
    WorkRanges ranges(count, n);
    ThreadPool pool(n);
    std::vector<std::vector<Piece>> pieces(static_cast<std::size_t>(n));
    pool.run([&](int thread, int) {
        ranges.run(thread, chunk, [&](int64_t begin, int64_t end) {
            pieces[static_cast<std::size_t>(thread)].push_back({begin, end});
            for (int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)].fetch_add(1);
            if (thread == slow) std::this_thread::sleep_for(std::chrono::milliseconds(2));
        });
    });
    return pieces;
}

TEST(WorkRanges, EveryItemOnceWhateverTheSpeeds) {
    for (int n : {1, 2, 3, 8}) {
        for (int64_t count : {0, 1, 5, 64, 1001}) {
            for (int64_t chunk : {1, 4, 100}) {
                SCOPED_TRACE(testing::Message()
                             << n << " threads, " << count << " items, chunk " << chunk);
                std::vector<std::atomic<int>> seen(static_cast<std::size_t>(count));
                const auto pieces = run_ranges(count, n, chunk, /*slow=*/n - 1, seen);
                for (int64_t i = 0; i < count; ++i) {
                    ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << "item " << i;
                }
                for (const auto& own : pieces) {
                    for (const Piece& p : own) EXPECT_LT(p.begin, p.end);
                }
            }
        }
    }
}

TEST(WorkRanges, OwnShareInOrderThenTheSlowThreadsWorkFromItsBack) {
    constexpr int64_t kCount = 400, kChunk = 10;
    std::vector<std::atomic<int>> seen(kCount);
    const auto pieces = run_ranges(kCount, 2, kChunk, /*slow=*/1, seen);
    // Thread 0: its share [0, 200) in chunks of 10, in order, then pieces stolen from the back of
    // thread 1's share [200, 400), each before the last.
    const auto& fast = pieces[0];
    ASSERT_GE(fast.size(), 21u);
    for (std::size_t k = 0; k < 20; ++k) {
        EXPECT_EQ(fast[k].begin, static_cast<int64_t>(k) * kChunk);
        EXPECT_EQ(fast[k].end, static_cast<int64_t>(k + 1) * kChunk);
    }
    for (std::size_t k = 20; k < fast.size(); ++k) {
        EXPECT_GE(fast[k].begin, 200);
        if (k > 20) {
            EXPECT_EQ(fast[k].end, fast[k - 1].begin);
        }
    }
    // The slow thread (2 ms per piece) did less than its share (a few chunks, unless the fast
    // one lost its CPU for tens of milliseconds).
    int64_t slow_items = 0;
    for (const Piece& p : pieces[1]) slow_items += p.end - p.begin;
    EXPECT_LT(slow_items, 200);
}

TEST(WorkRanges, APoolOfOtherSizeStillDoesEveryItemOnce) {
    for (const auto& [shares, threads] : {std::pair{2, 3}, std::pair{4, 2}}) {
        SCOPED_TRACE(testing::Message() << shares << " shares, " << threads << " threads");
        WorkRanges ranges(100, shares);
        ThreadPool pool(threads);
        std::vector<std::atomic<int>> seen(100);
        pool.run([&](int thread, int) {
            ranges.run(thread, 7, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
            });
        });
        for (int i = 0; i < 100; ++i) ASSERT_EQ(seen[static_cast<std::size_t>(i)].load(), 1) << i;
    }
}

// A reset hands every item out once more, each thread's share again from its start.
TEST(WorkRanges, ResetRunsTheSameItemsAgain) {
    WorkRanges ranges(10, 2);
    ThreadPool pool(2);
    for (int round = 1; round <= 3; ++round) {
        std::vector<std::atomic<int>> seen(10);
        pool.run([&](int thread, int) {
            ranges.run(thread, 2, [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) seen[static_cast<std::size_t>(i)]++;
            });
        });
        for (const auto& s : seen) EXPECT_EQ(s.load(), 1) << "round " << round;
        // Run out: nothing is left until the reset.
        pool.run([&](int thread, int) {
            ranges.run(thread, 2, [&](int64_t, int64_t) { ADD_FAILURE() << "an item twice"; });
        });
        ranges.reset();
    }
}

TEST(WorkRanges, RefusesWhatItCannotHold) {
    EXPECT_THROW(WorkRanges(-1, 2), UsageError);
    EXPECT_THROW(WorkRanges(int64_t{1} << 32, 2), UsageError);
    EXPECT_THROW(WorkRanges(10, 0), UsageError);
    EXPECT_THROW(WorkRanges(10, -3), UsageError);
}

}  // namespace
}  // namespace minfer
