// `minfer bench-serve URL`: load on any OpenAI-compatible server (src/server/load_generator.h), one
// row per concurrency: aggregate generated tokens/s, requests/s, time to first token and
// inter-token latency (p50 / p99). A markdown table, or --json.

#include <unistd.h>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/interrupt.h"
#include "cli/standard_output.h"
#include "core/error.h"
#include "core/log.h"
#include "core/terminal_text.h"
#include "server/header_value.h"
#include "server/load_generator.h"

namespace minfer::cli {
namespace {

struct BenchServeOptions {
    std::string url;
    std::string concurrency = "1,4,16";
    int prompt_tokens = 128;
    int gen_tokens = 128;
    int requests = 0;
    std::string model = "default";
    std::string api_key;
    int timeout = 600;
    bool json = false;
};

std::vector<int> parse_list(const std::string& text) {
    std::vector<int> out;
    std::istringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        std::size_t used = 0;
        int v = 0;
        try {
            v = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || v < 1 || v > 4096)
            throw UsageError(concat("--concurrency: '", item, "' is not a number from 1 to 4096"));
        out.push_back(v);
    }
    if (out.empty()) throw UsageError("--concurrency needs at least one value");
    return out;
}

}  // namespace

void add_bench_serve_command(CLI::App& app) {
    auto o = std::make_shared<BenchServeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "bench-serve",
        "Measure an OpenAI-compatible server (minfer serve, llama-server, vLLM, ...) "
        "under concurrent streamed requests");
    cmd->add_option("url", o->url, "The server: http://HOST:PORT (or .../v1)")->required();
    cmd->add_option("--concurrency", o->concurrency,
                    "Clients at once, comma-separated: one row each")
        ->capture_default_str();
    cmd->add_option(
           "--prompt-tokens", o->prompt_tokens,
           "About this many prompt tokens per request (random words, distinct per request)")
        ->check(CLI::Range(0, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--gen-tokens", o->gen_tokens,
                    "Tokens generated per request (asked for with ignore_eos)")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    cmd->add_option("--requests", o->requests,
                    "Requests per row (default: 4 x the concurrency, at least 8)")
        ->check(CLI::Range(1, 1 << 24));
    cmd->add_option("--model", o->model, "The model name sent in requests")->capture_default_str();
    cmd->add_option("--api-key", o->api_key, "Sent as 'Authorization: Bearer KEY'");
    cmd->add_option("--timeout", o->timeout,
                    "Seconds a request may take before it counts as failed")
        ->check(CLI::Range(1, 86400))
        ->capture_default_str();
    cmd->add_flag("--json", o->json, "Print a JSON array");
    cmd->callback([o] {
        const std::vector<int> levels = parse_list(o->concurrency);
        server::check_load_test_url(o->url);
        server::require_header_value(o->api_key, "--api-key");
        // Ctrl-C: the requests in flight are cut, the rows measured so far are printed (--json
        // too), and the command exits 130.
        InterruptGuard interrupt;
        // What the server says it runs on (minfer serve says; other servers do not): named by
        // each JSON row and under the table. A server's words, so cut short and escaped.
        server::LoadTestOptions probe;
        probe.url = o->url;
        probe.model = o->model;
        probe.api_key = o->api_key;
        probe.timeout_seconds = o->timeout;
        server::ServerDevice device = server::describe_server_device(probe);
        constexpr std::size_t kMaxDeviceText = 200;
        if (device.backend.size() > kMaxDeviceText) device.backend.resize(kMaxDeviceText);
        if (device.device.size() > kMaxDeviceText) device.device.resize(kMaxDeviceText);
        nlohmann::ordered_json rows = nlohmann::ordered_json::array();
        // Rows are written as they are measured and checked at once: a full disk or a closed
        // pipe ends the command before minutes of load, not after.
        if (!o->json) {
            write_streamed(
                "| clients | requests | failed | prompt tok | gen tok/s | req/s | TTFT p50 s | "
                "TTFT p99 s | ITL p50 ms | ITL p99 ms |\n"
                "| ------: | -------: | -----: | ---------: | --------: | ----: | ---------: | "
                "---------: | ---------: | ---------: |\n");
        }
        for (const int c : levels) {
            server::LoadTestOptions lo;
            lo.url = o->url;
            lo.model = o->model;
            lo.api_key = o->api_key;
            lo.concurrency = c;
            lo.requests = o->requests > 0 ? o->requests : std::max(8, 4 * c);
            if (lo.requests < c) {
                log_warning(concat("--concurrency ", c, " with --requests ", lo.requests, ": only ",
                                   lo.requests, " clients run at once"));
            }
            lo.prompt_tokens = o->prompt_tokens;
            lo.gen_tokens = o->gen_tokens;
            lo.seed = static_cast<uint64_t>(c);
            lo.timeout_seconds = o->timeout;
            lo.stop = &InterruptGuard::flag();
            const bool tty = ::isatty(STDERR_FILENO) == 1;
            const auto r = server::run_load_test(lo, [&](int done, int total) {
                if (tty) std::fprintf(stderr, "\r%d clients: %d/%d requests", c, done, total);
            });
            if (tty) std::fprintf(stderr, "\r\033[K");
            if (r.interrupted) break;  // a row of fewer requests than asked is not a measurement
            if (r.failed > 0)
                log_warning(
                    concat(r.failed, " of ", r.requests, " requests failed: ", r.first_error));
            if (o->json) {
                rows.push_back({{"concurrency", r.concurrency},
                                {"requests", r.requests},
                                {"failed", r.failed},
                                {"first_error", r.failed > 0 ? r.first_error : std::string()},
                                {"seconds", r.seconds},
                                {"mean_prompt_tokens", r.mean_prompt_tokens},
                                {"generated_tokens", r.generated_tokens},
                                {"tokens_per_second", r.tokens_per_second},
                                {"requests_per_second", r.requests_per_second},
                                {"ttft_p50_s", r.ttft_p50},
                                {"ttft_p99_s", r.ttft_p99},
                                {"itl_p50_s", r.itl_p50},
                                {"itl_p99_s", r.itl_p99},
                                {"server_backend", device.backend},
                                {"server_device", device.device}});
            } else {
                char row[256];
                std::snprintf(row, sizeof row,
                              "| %7d | %8d | %6d | %10.1f | %9.1f | %5.2f | %10.2f | %10.2f | "
                              "%10.1f | %10.1f |\n",
                              r.concurrency, r.requests, r.failed, r.mean_prompt_tokens,
                              r.tokens_per_second, r.requests_per_second, r.ttft_p50, r.ttft_p99,
                              r.itl_p50 * 1000, r.itl_p99 * 1000);
                write_streamed(row);
            }
        }
        if (o->json) {
            write_streamed(rows.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n");
        } else {
            write_streamed(concat("\nServer device: ",
                                  device.device.empty()
                                      ? std::string("not said (the server's /v1/models has no "
                                                    "meta.device: not minfer serve)")
                                      : escape_for_terminal(device.device),
                                  "\n"));
        }
        if (InterruptGuard::flag()) throw InterruptedByUser{};
    });
}

}  // namespace minfer::cli
