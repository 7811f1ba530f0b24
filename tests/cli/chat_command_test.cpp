// `minfer chat` end to end: scripted through stdin (context kept across turns, only new tokens
// evaluated) and on a pseudo-terminal (Ctrl-C stops an answer and returns to the prompt).

#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "common/fixtures.h"
#include "core/error.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_simd.h"

namespace minfer {
namespace {

using test::run_minfer;

struct TurnStats {
    int evaluated;
    int reused;
    std::string stop;
};

std::vector<TurnStats> parse_stats(const std::string& err) {
    // "[prompt: N new tokens evaluated, M reused from the cache; answer: K tokens, X tokens/s;
    // stop: S]"
    std::vector<TurnStats> turns;
    std::istringstream lines(err);
    for (std::string line; std::getline(lines, line);) {
        const auto at = line.find("[prompt: ");
        if (at == std::string::npos) continue;
        int evaluated = 0, reused = 0, tokens = 0;
        double speed = 0;
        char stop[32] = {};
        if (std::sscanf(line.c_str() + at,
                        "[prompt: %d new tokens evaluated, %d reused from the cache; answer: %d "
                        "tokens, %lf "
                        "tokens/s; stop: %31[a-z]]",
                        &evaluated, &reused, &tokens, &speed, stop) == 5) {
            turns.push_back({evaluated, reused, stop});
        }
    }
    return turns;
}

TEST(ChatCommand, ScriptedTurnsReuseTheCache) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    const auto r = run_minfer({"chat", model.string(), "--temp", "0", "-n", "6", "--stats"},
                              "Hello, who are you?\nTell me more.\n/clear\nHello, who are you?\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto turns = parse_stats(r.err);
    ASSERT_EQ(turns.size(), 3u) << r.err;
    // Turn 1 evaluates the whole prompt; turn 2 reuses all of it (and the answer) and evaluates
    // only the end of the answer, the new user message and the generation prompt.
    EXPECT_EQ(turns[0].reused, 0);
    EXPECT_GT(turns[1].reused, turns[0].evaluated);
    EXPECT_LT(turns[1].evaluated, turns[1].reused / 2);
    // After /clear the conversation starts over: only the shared system prefix is reused, and the
    // same greedy question gets the same answer as in turn 1.
    EXPECT_LT(turns[2].reused, turns[0].evaluated);
    std::istringstream out(r.out);
    std::string first, second, third;
    std::getline(out, first);
    std::getline(out, second);
    std::getline(out, third);
    EXPECT_EQ(first, third);
    EXPECT_FALSE(first.empty());
}

TEST(ChatCommand, SystemPromptAndExit) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    const auto r = run_minfer(
        {"chat", model.string(), "--temp", "0", "-n", "3", "--stats", "--system", "Be brief."},
        "Hi\n/exit\nThis line is never read\n");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(parse_stats(r.err).size(), 1u);
}

// What a pseudo-terminal's program wrote, read as it comes; expect() moves a cursor past each
// match.
class PtyReader {
  public:
    explicit PtyReader(int fd) : fd_(fd) {}

    // Waits until `needle` appears after the cursor; moves the cursor past it.
    bool expect(const std::string& needle, int timeout_ms = 20000) {
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (true) {
            if (const auto at = seen_.find(needle, cursor_); at != std::string::npos) {
                cursor_ = at + needle.size();
                return true;
            }
            if (std::chrono::steady_clock::now() >= deadline || !read_some()) return false;
        }
    }
    // Waits until anything arrives after the cursor.
    bool expect_more(int timeout_ms = 20000) {
        const auto deadline =
            std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
        while (seen_.size() <= cursor_) {
            if (std::chrono::steady_clock::now() >= deadline || !read_some()) return false;
        }
        return true;
    }
    const std::string& seen() const { return seen_; }

  private:
    bool read_some() {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) return true;
        char buf[4096];
        const ssize_t n = read(fd_, buf, sizeof(buf));
        if (n <= 0) return false;
        seen_.append(buf, static_cast<std::size_t>(n));
        return true;
    }

    int fd_;
    std::string seen_;
    std::size_t cursor_ = 0;
};

TEST(ChatCommand, CtrlCStopsTheAnswerOnATerminal) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-f16.gguf");
    int master = -1;
    const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // Ban the end-of-text token (id 2) so the answer runs until interrupted or the 4096-token
        // context fills (seconds on this model).
        execl(MINFER_BINARY, "minfer", "chat", model.c_str(), "--temp", "1", "--ctx", "4096",
              "--logit-bias", "2-inf", "--stats", "-t", "1", static_cast<char*>(nullptr));
        _exit(127);
    }
    PtyReader pty(master);
    ASSERT_TRUE(pty.expect("> ")) << pty.seen();
    usleep(300000);  // let line editing take over the terminal before typing
    ASSERT_EQ(write(master, "Once upon a time\r", 17), 17);
    ASSERT_TRUE(pty.expect("Once upon a time")) << pty.seen();
    ASSERT_TRUE(pty.expect("\n")) << pty.seen();
    // The answer is being written (a fixed wait was too short on a loaded machine once).
    ASSERT_TRUE(pty.expect_more()) << pty.seen();
    usleep(100000);
    ASSERT_EQ(write(master, "\x03", 1), 1);  // Ctrl-C
    ASSERT_TRUE(pty.expect("stop: interrupted")) << pty.seen();
    ASSERT_TRUE(pty.expect("> ")) << pty.seen();  // back at the prompt
    ASSERT_EQ(write(master, "/exit\r", 6), 6);
    int status = 0;
    for (int i = 0; i < 200 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(50000);
    if (!WIFEXITED(status)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        FAIL() << "minfer chat did not exit after /exit: " << pty.seen();
    }
    close(master);
    EXPECT_EQ(WEXITSTATUS(status), 0) << pty.seen();
}

TEST(BenchCommand, PrintsATableAndJson) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    const auto table = run_minfer(
        {"bench", model.string(), "-p", "16", "-n", "4", "-r", "2", "-t", "1,2", "--no-roofline"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("| model"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("pp16"), std::string::npos);
    EXPECT_NE(table.out.find("tg4"), std::string::npos);
    EXPECT_NE(table.out.find(" ± "), std::string::npos);
    const auto json =
        run_minfer({"bench", model.string(), "-p", "8", "-n", "2", "-r", "2", "-t", "1", "--json"});
    ASSERT_EQ(json.exit_code, 0) << json.err;
    const auto doc = nlohmann::json::parse(json.out);
    ASSERT_EQ(doc.size(), 2u);
    for (const char* key :
         {"model_filename", "model_type", "model_size", "model_n_params", "n_threads", "n_prompt",
          "n_gen", "avg_ts", "stddev_ts", "samples_ts", "cpu_info", "kernels"}) {
        EXPECT_TRUE(doc[0].contains(key)) << key;
    }
    // The kernels this machine runs: a SIMD target's name (the CI machines have one) or "scalar".
    EXPECT_FALSE(doc[0]["kernels"].get<std::string>().empty());
    // And per weight type of the matrices (this model's are all Q4_0): the interleaved kernels or
    // the panels of a Highway target, never empty.
    ASSERT_TRUE(doc[0]["kernels_by_type"].is_object()) << json.out;
    ASSERT_TRUE(doc[0]["kernels_by_type"].contains("q4_0")) << json.out;
    EXPECT_NE(doc[0]["kernels_by_type"]["q4_0"].get<std::string>().find(" int"), std::string::npos);
    EXPECT_NE(table.out.find("Kernels: "), std::string::npos) << table.out;
    EXPECT_EQ(doc[0]["model_type"], "llama 3.4M Q4_0");  // small models in M, not "0.0B"
    EXPECT_EQ(doc[0]["n_prompt"], 8);
    EXPECT_EQ(doc[1]["n_gen"], 2);
    EXPECT_EQ(doc[0]["samples_ts"].size(), 2u);
    EXPECT_EQ(doc[0]["batch_invariant"], true);  // the default
    const auto gemv = run_minfer({"bench", model.string(), "-p", "0", "-n", "2", "-r", "1", "-t",
                                  "1", "--no-batch-invariant", "--json"});
    ASSERT_EQ(gemv.exit_code, 0) << gemv.err;
    EXPECT_EQ(nlohmann::json::parse(gemv.out)[0]["batch_invariant"], false);
    const auto csv =
        run_minfer({"bench", model.string(), "-p", "8", "-n", "0", "-r", "1", "-t", "1", "--csv"});
    ASSERT_EQ(csv.exit_code, 0) << csv.err;
    EXPECT_EQ(csv.out.rfind("build_commit,", 0), 0u) << csv.out;
}

// -np: N sequences prefilled with -p tokens each, then decoding -n tokens together (one row per
// combination, llama-batched-bench's "pp+tg"); -d: tokens already in the cache. The JSON says
// which row is which.
TEST(BenchCommand, MeasuresParallelSequencesAndDepth) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    const auto r = run_minfer({"bench", model.string(), "-p", "8", "-n", "4", "-np", "1,3", "-d",
                               "0,20", "-r", "1", "-t", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    ASSERT_EQ(doc.size(), 4u) << r.out;  // pp8+tg4 at 2 depths x 2 parallel counts
    std::set<std::tuple<int, int, int, int>> seen;
    for (const auto& row : doc) {
        seen.insert({row["n_prompt"].get<int>(), row["n_gen"].get<int>(),
                     row["n_parallel"].get<int>(), row["n_depth"].get<int>()});
        EXPECT_GT(row["avg_ts"].get<double>(), 0);
    }
    for (int depth : {0, 20}) {
        EXPECT_TRUE(seen.count({8, 4, 1, depth})) << depth;
        EXPECT_TRUE(seen.count({8, 4, 3, depth})) << depth;
    }
    const auto bad = run_minfer({"bench", model.string(), "-np", "0"});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
}

TEST(BenchCommand, RooflineReportsBandwidth) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    const auto r =
        run_minfer({"bench", model.string(), "-p", "0", "-n", "8", "-r", "1", "-t", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Decode roofline"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("GB/s read bandwidth (the higher of samples between the decode steps "
                         "and a read after them) = "),
              std::string::npos)
        << r.out;
    // The bandwidth's 512 MiB read buffer is not the model's memory: the peak leaves it out.
    const auto peak = r.out.find("Peak resident memory: ");
    ASSERT_NE(peak, std::string::npos) << r.out;
    EXPECT_LT(std::stod(r.out.substr(peak + 22)), 400.0) << r.out;
}

// MINFER_SOFTWARE_PREFETCH=0/1 overrides the CPU's rule for the x86 packed kernels' prefetches,
// a number of bytes their distance, and the kernels' name says which is in force (figures from
// one CPU differ by it); a value that is none of those leaves the CPU's rule.
TEST(BenchCommand, SoftwarePrefetchFollowsTheEnvironment) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    const std::string kernels = kernels_in_use();
    if (kernels.rfind("AVX2", 0) != 0 && kernels.rfind("AVX3", 0) != 0) {
        GTEST_SKIP() << "no x86 packed kernels here: " << kernels;
    }
    const std::string cpu_choice =
        x86_software_prefetch()
            ? concat("(software prefetch on, ", x86_software_prefetch_distance(), " bytes ahead)")
            : std::string("(software prefetch off)");
    const std::pair<const char*, std::string> cases[] = {
        {"0", "(software prefetch off)"},
        {"1", "(software prefetch on, "},
        {"4096", "(software prefetch on, 4096 bytes ahead)"},
        {"4000", cpu_choice},  // not a multiple of 64
        {"8k", cpu_choice}};
    for (const auto& [choice, expected] : cases) {
        const auto r = run_minfer({"bench", model.string(), "-p", "0", "-n", "2", "-r", "1", "-t",
                                   "1", "--json", "--no-roofline"},
                                  "", {{"MINFER_SOFTWARE_PREFETCH", choice}});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_NE(nlohmann::json::parse(r.out)[0]["kernels"].get<std::string>().find(expected),
                  std::string::npos)
            << choice << ": " << r.out;
    }
}

// --json carries the roofline per decode row: bytes a step, their rate, the bandwidth measured
// beside the steps and the fraction; not on prompt rows, nor on -np rows with a prompt (their time
// counts the prefill), nor with --no-roofline.
TEST(BenchCommand, JsonCarriesTheBandwidthFraction) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    const auto r = run_minfer(
        {"bench", model.string(), "-p", "8", "-n", "8", "-r", "1", "-t", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    ASSERT_EQ(doc.size(), 2u) << r.out;
    EXPECT_FALSE(doc[0].contains("bandwidth_fraction")) << doc[0];  // pp8
    const auto& tg = doc[1];
    ASSERT_TRUE(tg.contains("bandwidth_fraction")) << tg;
    EXPECT_EQ(tg["decode_bytes_per_step"], 1886352);  // the model's weights, read once a step
    EXPECT_GT(tg["read_bandwidth_bps"].get<double>(), 1e8);
    EXPECT_NEAR(tg["bandwidth_fraction"].get<double>(),
                tg["decode_read_bps"].get<double>() / tg["read_bandwidth_bps"].get<double>(),
                0.2 * tg["bandwidth_fraction"].get<double>());
    const auto parallel = run_minfer({"bench", model.string(), "-p", "8", "-n", "4", "-np", "2",
                                      "-r", "1", "-t", "1", "--json"});
    ASSERT_EQ(parallel.exit_code, 0) << parallel.err;
    EXPECT_FALSE(nlohmann::json::parse(parallel.out)[0].contains("bandwidth_fraction"));
    const auto off = run_minfer({"bench", model.string(), "-p", "0", "-n", "4", "-r", "1", "-t",
                                 "1", "--json", "--no-roofline"});
    ASSERT_EQ(off.exit_code, 0) << off.err;
    EXPECT_FALSE(nlohmann::json::parse(off.out)[0].contains("bandwidth_fraction"));
}

// The load line: the engine's start with the repacked bytes (or none with --no-repack), and the
// process's peak resident memory; the JSON says which was used.
TEST(BenchCommand, ReportsRepackingLoadAndResidentMemory) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-q4_0.gguf");
    const bool packs = kernels::packed_kernels_available(GgmlType::Q4_0);
    for (const bool repack : {true, false}) {
        std::vector<std::string> args = {
            "bench", model.string(), "-p", "0", "-n", "2", "-r", "1", "-t", "1", "--no-roofline"};
        if (!repack) args.push_back("--no-repack");
        const auto table = run_minfer(args);
        ASSERT_EQ(table.exit_code, 0) << table.err;
        EXPECT_NE(table.out.find("Load: model "), std::string::npos) << table.out;
        EXPECT_NE(table.out.find(repack && packs ? "of weights repacked"
                                                 : "weights zero-copy in the mapped file"),
                  std::string::npos)
            << table.out;
        EXPECT_NE(table.out.find("Peak resident memory: "), std::string::npos) << table.out;
        args.push_back("--json");
        const auto json = run_minfer(args);
        ASSERT_EQ(json.exit_code, 0) << json.err;
        const auto row = nlohmann::json::parse(json.out).at(0);
        EXPECT_EQ(row["repack"], repack);
        EXPECT_EQ(row["repacked_bytes"].get<uint64_t>() > 0, repack && packs);
        EXPECT_GT(row["load_ms"].get<double>(), 0);
        EXPECT_GT(row["prepare_ms"].get<double>(), 0);
    }
}

}  // namespace
}  // namespace minfer
