#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <sched.h>

#include "core/error.h"
#include "core/thread_pool.h"

namespace minfer {
namespace {

TEST(ThreadPool, RunsEveryThreadIndexOnceAndWaits) {
    for (int n : {1, 2, 3, 8}) {
        ThreadPool pool(n);
        EXPECT_EQ(pool.size(), n);
        for (int round = 0; round < (n <= 2 ? 200 : 20); ++round) {
            std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
            pool.run([&](int i, int total) {
                EXPECT_EQ(total, n);
                hits[static_cast<std::size_t>(i)].fetch_add(1);
            });
            for (auto& h : hits) ASSERT_EQ(h.load(), 1);  // all done when run returns
        }
    }
}

TEST(ThreadPool, CallerIsThreadZero) {
    ThreadPool pool(3);
    const auto caller = std::this_thread::get_id();
    std::thread::id zero;
    pool.run([&](int i, int) {
        if (i == 0) zero = std::this_thread::get_id();
    });
    EXPECT_EQ(zero, caller);
}

TEST(ThreadPool, WakesWorkersAfterTheyFellAsleep) {
    ThreadPool pool(2);
    std::this_thread::sleep_for(std::chrono::microseconds(ThreadPool::kYieldMicros * 3));
    std::atomic<int> count{0};
    pool.run([&](int, int) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 2);
}

TEST(ThreadPool, RethrowsAWorkersExceptionAfterAllFinished) {
    ThreadPool pool(3);
    std::atomic<int> finished{0};
    EXPECT_THROW(pool.run([&](int i, int) {
        if (i == 2) throw std::runtime_error("boom");
        finished.fetch_add(1);
    }),
                 std::runtime_error);
    EXPECT_EQ(finished.load(), 2);
    // Still usable afterwards.
    pool.run([&](int, int) { finished.fetch_add(1); });
    EXPECT_EQ(finished.load(), 5);
}

TEST(ThreadPool, RejectsBadSizesAndReentrantRuns) {
    EXPECT_THROW(ThreadPool(0), UsageError);
    EXPECT_THROW(ThreadPool(-3), UsageError);
    ThreadPool pool(2);
    EXPECT_THROW(pool.run([&](int i, int) {
        if (i == 0) pool.run([](int, int) {});
    }),
                 UsageError);
}

TEST(ThreadPool, PinnedPoolWorks) {
    ThreadPool pool(2, /*pin_threads=*/true);
    std::atomic<int> count{0};
    for (int round = 0; round < 10; ++round) pool.run([&](int, int) { count.fetch_add(1); });
    EXPECT_EQ(count.load(), 20);
}

int caller_cpu_count() {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    return CPU_COUNT(&set);
}

// bench -t 1,2 builds one pinned pool after another: the second must not inherit the first's
// pinning of the caller (it once put both of its threads on one CPU, 10x slower decoding).
TEST(ThreadPool, PinnedPoolGivesTheCallerItsCpusBack) {
    const int before = caller_cpu_count();
    {
        ThreadPool pool(2, /*pin_threads=*/true);
        EXPECT_EQ(caller_cpu_count(), 1);
    }
    EXPECT_EQ(caller_cpu_count(), before);
}

// bench_kernels keeps a 1-thread and a 2-thread pool alive together: the second one's worker
// must get its own CPU although the caller is pinned by the first.
TEST(ThreadPool, CoexistingPinnedPoolsSpreadOverTheCpus) {
    const int n_cpus = caller_cpu_count();
    if (n_cpus < 2) GTEST_SKIP() << "needs 2 CPUs";
    ThreadPool one(1, /*pin_threads=*/true);
    ThreadPool two(2, /*pin_threads=*/true);
    std::atomic<int> cpu_of[2] = {-1, -1};
    two.run([&](int i, int) { cpu_of[i] = sched_getcpu(); });
    EXPECT_NE(cpu_of[0].load(), cpu_of[1].load());
}

}  // namespace
}  // namespace minfer
