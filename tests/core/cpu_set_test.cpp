// usable_cpu_count, clamp_thread_count and CallerPin against the affinity the OS reports.

#include "core/cpu_set.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"

namespace minfer {
namespace {

// The calling thread's CPUs, straight from the OS.
std::vector<int> affinity() {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
}

// Collects the warnings logged while it lives.
class WarningCapture {
  public:
    WarningCapture() {
        set_log_sink([this](LogLevel level, std::string_view message) {
            if (level == LogLevel::Warning) warnings.emplace_back(message);
        });
    }
    ~WarningCapture() { set_log_sink(nullptr); }
    std::vector<std::string> warnings;
};

// Runs fn on a new thread bound to the first CPU of the caller (threads inherit affinity).
template <class Fn>
void on_one_cpu(Fn fn) {
    const int cpu = affinity().front();
    std::thread thread([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
        fn();
    });
    thread.join();
}

TEST(CpuSet, UsableCpusAreTheAffinity) {
    EXPECT_EQ(thread_cpus(), affinity());
    EXPECT_EQ(usable_cpus(), affinity());
    EXPECT_EQ(usable_cpu_count(), static_cast<int>(affinity().size()));
}

TEST(CpuSet, ZeroMeansEveryUsableCpu) {
    WarningCapture capture;
    EXPECT_EQ(clamp_thread_count(0, "-t"), usable_cpu_count());
    EXPECT_TRUE(capture.warnings.empty());
}

TEST(CpuSet, CountsUpToTheCpusAreKeptSilently) {
    WarningCapture capture;
    EXPECT_EQ(clamp_thread_count(1, "-t"), 1);
    const int n = usable_cpu_count();
    EXPECT_EQ(clamp_thread_count(n, "-t"), n);
    EXPECT_TRUE(capture.warnings.empty());
}

TEST(CpuSet, MoreThreadsThanCpusAreClampedWithOneWarning) {
    WarningCapture capture;
    const int n = usable_cpu_count();
    EXPECT_EQ(clamp_thread_count(1000, "-t"), n);
    ASSERT_EQ(capture.warnings.size(), 1u);
    const std::string expected =
        n == 1 ? "-t 1000: only 1 CPU is available to this process; using 1 thread"
               : concat("-t 1000: only ", n, " CPUs are available to this process; using ", n,
                        " threads");
    EXPECT_EQ(capture.warnings[0], expected);
}

TEST(CpuSet, NegativeCountsAreRefused) {
    EXPECT_THROW(clamp_thread_count(-1, "-t"), UsageError);
}

TEST(CpuSet, ClampsToARestrictedAffinity) {
    on_one_cpu([] {
        WarningCapture capture;
        EXPECT_EQ(usable_cpu_count(), 1);
        EXPECT_EQ(clamp_thread_count(0, "--threads"), 1);
        EXPECT_EQ(clamp_thread_count(2, "--threads"), 1);
        ASSERT_EQ(capture.warnings.size(), 1u);
        EXPECT_EQ(capture.warnings[0],
                  "--threads 2: only 1 CPU is available to this process; using 1 thread");
    });
}

// A pinned pool binds its caller to one CPU; a second context made meanwhile must still see them
// all, and the caller gets its CPUs back afterwards.
TEST(CpuSet, CallerPinKeepsTheUsableCpusAndRestoresTheAffinity) {
    const std::vector<int> before = affinity();
    {
        CallerPin pin(before.back());
        EXPECT_EQ(affinity(), std::vector<int>{before.back()});
        EXPECT_EQ(usable_cpus(), before);
        {
            CallerPin nested(before.front());
            EXPECT_EQ(affinity(), std::vector<int>{before.front()});
            EXPECT_EQ(usable_cpus(), before);
        }
        EXPECT_EQ(affinity(), std::vector<int>{before.back()});
        EXPECT_EQ(usable_cpu_count(), static_cast<int>(before.size()));
    }
    EXPECT_EQ(affinity(), before);
    EXPECT_EQ(usable_cpus(), before);
}

}  // namespace
}  // namespace minfer
