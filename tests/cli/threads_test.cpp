// More threads than CPUs, end to end: `run` clamps -t to the CPUs the process may use (with a
// warning) instead of hanging at its barriers, and `bench` refuses to measure such a count.

#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/fixtures.h"

namespace minfer {
namespace {

using test::run_minfer_under;

// Every subprocess gets a time limit: the bug this guards against was a hang.
const std::vector<std::string> kTimeLimit = {"timeout", "60"};

std::vector<int> test_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
    std::vector<int> cpus;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
    return cpus;
}

std::string cpus_text(int n) {
    return n == 1 ? "only 1 CPU is available to this process"
                  : "only " + std::to_string(n) + " CPUs are available to this process";
}

std::vector<std::string> run_args(const std::string& model, const std::string& threads) {
    return {"run", model, "--raw", "-p", "Once", "-n", "16", "--temp", "0", "-t", threads};
}

// `timeout 60 taskset -c CPU`: the wrapper that runs minfer on the test's first CPU alone.
std::vector<std::string> on_one_cpu() {
    std::vector<std::string> wrapper = kTimeLimit;
    wrapper.insert(wrapper.end(), {"taskset", "-c", std::to_string(test_cpus().front())});
    return wrapper;
}

bool have_taskset() {
    return std::system("command -v taskset >/dev/null 2>&1") == 0;
}

TEST(Threads, RunClampsAThousandThreadsToTheCpus) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto one = run_minfer_under(kTimeLimit, run_args(model.string(), "1"));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto many = run_minfer_under(kTimeLimit, run_args(model.string(), "1000"));
    ASSERT_EQ(many.exit_code, 0) << many.err;  // 124: timed out
    const int n = static_cast<int>(test_cpus().size());
    const std::string warning = "minfer: warning: -t 1000: " + cpus_text(n) + "; using " +
                                std::to_string(n) + (n == 1 ? " thread" : " threads") + "\n";
    EXPECT_NE(many.err.find(warning), std::string::npos) << many.err;
    EXPECT_EQ(many.out, one.out);
    EXPECT_EQ(one.err.find("warning"), std::string::npos) << one.err;
}

TEST(Threads, RunOnOneCpuUsesOneThread) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    if (!have_taskset()) GTEST_SKIP() << "needs taskset (util-linux)";
    const auto one = run_minfer_under(kTimeLimit, run_args(model.string(), "1"));
    ASSERT_EQ(one.exit_code, 0) << one.err;
    const auto pinned = run_minfer_under(on_one_cpu(), run_args(model.string(), "2"));
    ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
    EXPECT_NE(pinned.err.find("minfer: warning: -t 2: only 1 CPU is available to this process; "
                              "using 1 thread\n"),
              std::string::npos)
        << pinned.err;
    EXPECT_EQ(pinned.out, one.out);
}

TEST(Threads, BenchRefusesMoreThreadsThanCpus) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const int n = static_cast<int>(test_cpus().size());
    const std::string threads = std::to_string(n + 1);
    const auto r = run_minfer_under(kTimeLimit, {"bench", model.string(), "-t", "1," + threads,
                                                 "-p", "8", "-n", "4", "-r", "1"});
    EXPECT_NE(r.exit_code, 0) << r.err;    // a usage error
    EXPECT_NE(r.exit_code, 124) << r.err;  // timed out
    EXPECT_NE(r.err.find("bench -t " + threads + ": " + cpus_text(n) +
                         "; measuring more threads than CPUs measures the scheduler"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;  // refused before measuring anything
}

TEST(Threads, BenchOnOneCpuRefusesTwoThreadsAndMeasuresOne) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    if (!have_taskset()) GTEST_SKIP() << "needs taskset (util-linux)";
    const std::vector<std::string> args = {"bench", model.string(),  "-p", "8", "-n", "4", "-r",
                                           "1",     "--no-roofline", "-t"};
    auto two = args;
    two.push_back("2");
    const auto refused = run_minfer_under(on_one_cpu(), two);
    EXPECT_NE(refused.exit_code, 0) << refused.err;    // a usage error
    EXPECT_NE(refused.exit_code, 124) << refused.err;  // timed out
    EXPECT_NE(refused.err.find("bench -t 2: only 1 CPU is available to this process; measuring "
                               "more threads than CPUs measures the scheduler"),
              std::string::npos)
        << refused.err;
    auto one = args;
    one.push_back("1");
    const auto measured = run_minfer_under(on_one_cpu(), one);
    EXPECT_EQ(measured.exit_code, 0) << measured.err;
    EXPECT_NE(measured.out.find("tg4"), std::string::npos) << measured.out;
}

}  // namespace
}  // namespace minfer
