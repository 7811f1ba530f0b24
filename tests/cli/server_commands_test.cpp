// `minfer serve` and `minfer bench-serve` against the command line's classes of hostile input
// (tests/cli/hardening_test.cpp has the other commands): how the server ends on signals, what it
// refuses before binding its port, and a load generator that reports what happened, stops at once
// on Ctrl-C and a failed write, and sends nothing it was not meant to.

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "common/process.h"
#include "common/server_process.h"

namespace minfer {
namespace {

using test::run_minfer;
using test::run_minfer_process;

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// A bench-serve run short enough for a test: one client, one request of a few tokens.
std::vector<std::string> bench_serve(const std::string& url, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"bench-serve",  url, "--concurrency",   "1",
                                     "--requests",   "1", "--prompt-tokens", "8",
                                     "--gen-tokens", "2"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

// ---- exit codes: a server's clean shutdown ----

TEST(ServeCommand, CtrlCAndSigtermShutDownCleanlyWithStatusZero) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::ProcessOptions options;
    options.interrupt_when_stderr_has = "minfer: serving";
    options.timeout = std::chrono::seconds(60);
    const auto r = run_minfer_process({"serve", model.string(), "--port", "0", "-t", "1"}, options);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "SIGINT: finishing running requests")) << r.err;
    EXPECT_TRUE(contains(r.err, "minfer: server stopped")) << r.err;

    test::ServerProcess server(model.string(), {"-t", "1"});
    ASSERT_TRUE(server.serving()) << server.log();
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// ---- what serve refuses or warns about before it binds its port ----

TEST(ServeCommand, ContradictorySizesAreRefusedBeforeListening) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    const std::string m = model.string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        // The first sequences would decode to their end while the others wait.
        {{"-np", "8", "-b", "4"}, "-b 4 is less than -np 8"},
        // 2^32 positions: said before the model loads, naming both flags.
        {{"-np", "256", "--ctx", "16777216"}, "-np 256 x --ctx 16777216 = 4294967296"},
        // Checked against the vocabulary once it is known, not at every request.
        {{"--logit-bias", "99999+1"}, "logit bias for token 99999: out of range"},
    };
    for (const auto& [flags, message] : cases) {
        std::vector<std::string> args = {"serve", m, "--port", "0", "-t", "1"};
        args.insert(args.end(), flags.begin(), flags.end());
        test::ProcessOptions options;
        options.timeout = std::chrono::seconds(30);  // a server that started would be killed
        const auto r = run_minfer_process(args, options);
        EXPECT_EQ(r.exit_code, 2) << flags[0] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "minfer: error: " + message)) << r.err;
        EXPECT_FALSE(contains(r.err, "minfer: serving")) << r.err;
    }
}

TEST(ServeCommand, KeysWithControlCharactersAreRefused) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::TempDir dir;
    const auto key_file = dir / "key";
    std::ofstream(key_file) << "secret\x1b[31m\n";
    for (const auto& flags : {std::vector<std::string>{"--api-key", "a\rb"},
                              std::vector<std::string>{"--api-key-file", key_file.string()},
                              std::vector<std::string>{"--cors-origin", "https://x\x01"}}) {
        std::vector<std::string> args = {"serve", model.string(), "--port", "0"};
        args.insert(args.end(), flags.begin(), flags.end());
        const auto r = run_minfer(args);
        EXPECT_EQ(r.exit_code, 2) << flags[0] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "must not hold control characters")) << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << r.err;
    }
}

TEST(ServeCommand, FlagsWithoutEffectAreSaidAndRequestDefaultsAreNot) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::ServerProcess server(
        model.string(), {"-t", "1000", "-b", "64", "--prefill-chunk", "128", "--no-access-log",
                         "--log-format", "json", "--temp", "0", "--top-k", "5"});
    ASSERT_TRUE(server.serving()) << server.log();
    const std::string log = server.log();
    // Clamped to the CPUs, with the warning run gives.
    EXPECT_TRUE(contains(log, "minfer: warning: -t 1000: only ")) << log;
    EXPECT_TRUE(contains(log, "warning: --prefill-chunk 128 has no effect beyond -b 64")) << log;
    EXPECT_TRUE(contains(log, "warning: --log-format has no effect with --no-access-log")) << log;
    // A request may set its own temperature: --top-k is its default then, not without effect.
    EXPECT_FALSE(contains(log, "--top-k has no effect")) << log;
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

// ---- bench-serve ----

TEST(BenchServeCommand, AFailedWriteEndsItBeforeAnyLoad) {
    // Against a port where nothing listens: the table's header fails first, so the error is the
    // write error and not the connection's (it used to run every level, then fail).
    test::ProcessOptions full;
    full.stdout_path = "/dev/full";
    const auto r = run_minfer_process(bench_serve("http://127.0.0.1:1"), full);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "minfer: error: write error: No space left on device")) << r.err;
    EXPECT_FALSE(contains(r.err, "Connection refused")) << r.err;

    test::ProcessOptions pipe;
    pipe.stdout_closed_pipe = true;
    const auto p = run_minfer_process(bench_serve("http://127.0.0.1:1"), pipe);
    EXPECT_EQ(p.exit_code, 1) << p.err;
    EXPECT_TRUE(contains(p.err, "write error: Broken pipe")) << p.err;
}

TEST(BenchServeCommand, UrlsAndKeysThatWouldBreakTheRequestAreRefused) {
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {bench_serve("http://127.0.0.1:1", {"--api-key", "k\r\nX-Injected: 1"}),
         "--api-key must not hold control characters (found \\x0d)"},
        {bench_serve("http://127.0.0.1:1/v1 x"), "a URL holds no spaces or control characters"},
        {bench_serve("http://127.0.0.1:99999"), "bad host or port (1 to 65535)"},
        {bench_serve("http://[::1"), "bad host or port"},
    };
    for (const auto& [args, message] : cases) {
        const auto r = run_minfer(args);
        EXPECT_EQ(r.exit_code, 2) << args[1] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "minfer: error: " + message)) << r.err;
        EXPECT_TRUE(r.out.empty()) << r.out;  // refused before the table starts
    }
}

TEST(BenchServeCommand, ReportsTheServersErrorAndTheClientsThatRan) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::ServerProcess server(model.string(), {"-t", "1", "--api-key", "right"});
    ASSERT_TRUE(server.serving()) << server.log();
    // The server's 401 and its message, not Boost's "body limit exceeded" (any response with a
    // Content-Length was misread so).
    const auto refused = run_minfer(bench_serve(server.url(), {"--api-key", "wrong"}));
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_TRUE(contains(refused.err, "HTTP 401")) << refused.err;
    EXPECT_FALSE(contains(refused.err, "body limit")) << refused.err;

    // 4 clients asked for, 2 requests: the row says how many ran, and a warning why.
    const auto r =
        run_minfer({"bench-serve", server.url(), "--concurrency", "4", "--requests", "2",
                    "--prompt-tokens", "8", "--gen-tokens", "2", "--api-key", "right", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rows = nlohmann::json::parse(r.out);
    ASSERT_EQ(rows.size(), 1u) << r.out;
    EXPECT_EQ(rows[0]["concurrency"], 2);
    EXPECT_EQ(rows[0]["requests"], 2);
    EXPECT_EQ(rows[0]["failed"], 0);
    EXPECT_EQ(rows[0]["first_error"], "") << r.out;
    EXPECT_TRUE(contains(r.err, "warning: --concurrency 4 with --requests 2: only 2 clients"))
        << r.err;
    // The device the server runs the model on, from its /v1/models (asked with the key).
    EXPECT_EQ(rows[0]["server_backend"], "CPU") << r.out;
    EXPECT_TRUE(rows[0]["server_device"].get<std::string>().starts_with("CPU: ")) << r.out;
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(BenchServeCommand, NamesTheDeviceTheServerSaysItRunsOn) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::ServerProcess server(model.string(), {"-t", "1", "--device", "reference"});
    ASSERT_TRUE(server.serving()) << server.log();
    const auto r = run_minfer(bench_serve(server.url()));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "\nServer device: Reference (double-precision loops)\n")) << r.out;
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

TEST(BenchServeCommand, ReachesAServerByItsIpv6Address) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::ServerProcess server(model.string(), {"-t", "1", "--host", "::1"});
    if (!server.serving()) GTEST_SKIP() << "no IPv6 loopback here: " << server.log();
    // The URL serve prints is one bench-serve (and a browser) takes: "http://[::1]:PORT".
    ASSERT_TRUE(contains(server.url(), "http://[::1]:")) << server.url();
    const auto r = run_minfer(bench_serve(server.url(), {"--json"}));
    EXPECT_EQ(r.exit_code, 0) << r.err;  // the brackets were taken for part of the host name
    EXPECT_FALSE(contains(r.err, "Host not found")) << r.err;
}

TEST(BenchServeCommand, CtrlCCutsTheRequestsAndExits130WithTheRowsSoFar) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-llama-f16.gguf");
    test::ServerProcess server(model.string(), {"-t", "1", "--ctx", "4096"});
    ASSERT_TRUE(server.serving()) << server.log();
    // 64 requests of up to 4096 tokens each: minutes, unless Ctrl-C cuts them.
    test::ProcessOptions options;
    options.interrupt_after = std::chrono::milliseconds(1500);
    options.timeout = std::chrono::seconds(30);
    const auto started = std::chrono::steady_clock::now();
    const auto r =
        run_minfer_process({"bench-serve", server.url(), "--concurrency", "2", "--requests", "64",
                            "--prompt-tokens", "8", "--gen-tokens", "4000", "--json"},
                           options);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(r.exit_code, 130) << r.err;
    EXPECT_LT(seconds, 15) << "the requests in flight were not cut";
    // The rows measured before (none here), as a whole JSON document.
    EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::array()) << r.out;
    EXPECT_EQ(server.stop(SIGTERM), 0) << server.log();
}

}  // namespace
}  // namespace minfer
