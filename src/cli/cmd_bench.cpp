// `minfer bench MODEL`: llama-bench's measurements. Prompt processing (ppN: N tokens in one go,
// in micro-batches) and token generation (tgN: N tokens one at a time), each repeated after a
// warm-up, as mean ± standard deviation of tokens/s; a markdown table (default), --json (an array
// of objects in llama-bench's shape) or --csv. Also the decode roofline: weight bytes read per
// token x tokens/s against the read bandwidth measured in the same run.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/format.h"
#include "core/cpu_set.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/machine_limits.h"
#include "model/context.h"
#include "quant/quant_mix.h"

namespace minfer::cli {
namespace {

struct BenchOptions {
    std::string model;
    std::vector<int> n_prompt = {512};
    std::vector<int> n_gen = {128};
    std::vector<int> threads;
    int repetitions = 5;
    int64_t batch = 512;
    bool json = false;
    bool csv = false;
    bool no_roofline = false;
};

struct TestResult {
    int n_prompt = 0;
    int n_gen = 0;
    int threads = 0;
    std::vector<double> samples_ns;
    std::vector<double> samples_ts;
    double avg_ts() const {
        return std::accumulate(samples_ts.begin(), samples_ts.end(), 0.0) / samples_ts.size();
    }
    double stddev_ts() const { return stddev(samples_ts); }
    double avg_ns() const {
        return std::accumulate(samples_ns.begin(), samples_ns.end(), 0.0) / samples_ns.size();
    }
    double stddev_ns() const { return stddev(samples_ns); }
    std::string name() const { return n_prompt > 0 ? concat("pp", n_prompt) : concat("tg", n_gen); }

    static double stddev(const std::vector<double>& v) {
        if (v.size() < 2) return 0.0;
        const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
        double sq = 0;
        for (double x : v) sq += (x - mean) * (x - mean);
        return std::sqrt(sq / (v.size() - 1));
    }
};

// "qwen2 0.5B Q4_0", like llama-bench's model_type; below 50 M parameters the size is in M
// ("llama 0.3M F32" rather than "0.0B").
std::string model_type(const Model& model) {
    const double params = static_cast<double>(model.n_params());
    const double billions = params / 1e9;
    std::string ftype;
    if (auto ft = model.metadata().get_int_optional("general.file_type")) {
        ftype = std::string(quant_mix_name(static_cast<QuantMix>(*ft)));
    }
    if (ftype.empty() || ftype == "?")
        ftype = std::string(type_name(model.weights().layers.front().ffn_down.type()));
    const std::string size = params < 5e7 ? format_fixed(params / 1e6, 1) + "M"
                                           : format_fixed(billions, billions < 10 ? 1 : 0) + "B";
    return concat(model.hparams().architecture, " ", size, " ", ftype);
}

// Random token ids drawn from the vocabulary (what llama-bench feeds too).
std::vector<int32_t> random_tokens(int n, int64_t n_vocab, std::mt19937& rng) {
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(n_vocab - 1));
    std::vector<int32_t> tokens(static_cast<std::size_t>(n));
    for (auto& t : tokens) t = id(rng);
    return tokens;
}

double run_once(InferenceContext& ctx, int n_prompt, int n_gen, std::mt19937& rng) {
    ctx.reset();
    const int64_t n_vocab = ctx.model().hparams().n_vocab;
    const auto start = std::chrono::steady_clock::now();
    if (n_prompt > 0) {
        ctx.evaluate_last(random_tokens(n_prompt, n_vocab, rng));
    }
    for (int i = 0; i < n_gen; ++i) {
        const int32_t token[1] = {static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab))};
        ctx.evaluate_last(token);
    }
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
        .count();
}

std::vector<int> parse_int_list(const std::string& text, const char* flag, int lo) {
    std::vector<int> out;
    std::istringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        try {
            std::size_t used = 0;
            const int v = std::stoi(item, &used);
            if (used != item.size() || v < lo) throw std::invalid_argument(item);
            out.push_back(v);
        } catch (const std::exception&) {
            throw UsageError(concat(flag, ": '", item, "' is not a number >= ", lo));
        }
    }
    if (out.empty()) throw UsageError(concat(flag, " needs at least one value"));
    return out;
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchOptions>();
    auto lists = std::make_shared<std::array<std::string, 3>>();
    (*lists)[0] = "512";
    (*lists)[1] = "128";
    CLI::App* cmd = app.add_subcommand(
        "bench", "Measure prompt processing and generation speed, like llama-bench");
    cmd->add_option("model", o->model, "GGUF model file")->required();
    cmd->add_option("-p,--n-prompt", (*lists)[0],
                    "Prompt lengths to test, comma-separated (0 skips)")
        ->capture_default_str();
    cmd->add_option("-n,--n-gen", (*lists)[1],
                    "Generation lengths to test, comma-separated (0 skips)")
        ->capture_default_str();
    cmd->add_option("-t,--threads", (*lists)[2],
                    "Thread counts to test, comma-separated (default: every core)");
    cmd->add_option("-r,--repetitions", o->repetitions, "Repetitions of each test")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_option("-b,--batch", o->batch, "Micro-batch size")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
        ->capture_default_str();
    auto* json = cmd->add_flag("--json", o->json, "Print a JSON array (llama-bench's fields)");
    cmd->add_flag("--csv", o->csv, "Print CSV (llama-bench's fields)")->excludes(json);
    cmd->add_flag("--no-roofline", o->no_roofline, "Skip the memory-bandwidth measurement");
    cmd->callback([o, lists] {
        o->n_prompt = parse_int_list((*lists)[0], "--n-prompt", 0);
        o->n_gen = parse_int_list((*lists)[1], "--n-gen", 0);
        o->threads = (*lists)[2].empty() ? std::vector<int>{default_thread_count()}
                                         : parse_int_list((*lists)[2], "--threads", 1);
        const int n_cpus = usable_cpu_count();
        for (int threads : o->threads) {
            if (threads > n_cpus) {
                throw UsageError(
                    concat("bench -t ", threads, ": ", cpus_available_text(n_cpus),
                           "; measuring more threads than CPUs measures the scheduler"));
            }
        }

        const auto path = resolve_model_path(o->model);
        auto model = Model::load(path);
        std::mt19937 rng(1234);
        std::vector<TestResult> results;
        int max_tokens = 1;
        for (int n : o->n_prompt) max_tokens = std::max(max_tokens, n);
        for (int n : o->n_gen) max_tokens = std::max(max_tokens, n);
        for (int threads : o->threads) {
            ContextOptions options;
            options.n_threads = threads;
            options.n_ctx = max_tokens;
            options.n_batch = o->batch;
            InferenceContext ctx(model, options);
            const auto measure = [&](int n_prompt, int n_gen) {
                TestResult r{n_prompt, n_gen, threads, {}, {}};
                run_once(ctx, n_prompt, n_gen, rng);  // warm-up: page the weights in, wake the pool
                for (int rep = 0; rep < o->repetitions; ++rep) {
                    const double ns = run_once(ctx, n_prompt, n_gen, rng);
                    r.samples_ns.push_back(ns);
                    r.samples_ts.push_back((n_prompt + n_gen) * 1e9 / ns);
                }
                results.push_back(std::move(r));
            };
            for (int n : o->n_prompt) {
                if (n > 0) measure(n, 0);
            }
            for (int n : o->n_gen) {
                if (n > 0) measure(0, n);
            }
        }

        const std::string type = model_type(*model);
        const uint64_t size = model->weight_bytes();
        const uint64_t params = model->n_params();
        if (o->json || o->csv) {
            nlohmann::ordered_json array = nlohmann::ordered_json::array();
            char time_buf[32];
            const std::time_t now = std::time(nullptr);
            std::strftime(time_buf, sizeof(time_buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
            for (const auto& r : results) {
                array.push_back({{"build_commit", MINFER_VERSION},
                                 {"backends", "CPU"},
                                 {"model_filename", path.string()},
                                 {"model_type", type},
                                 {"model_size", size},
                                 {"model_n_params", params},
                                 {"n_batch", o->batch},
                                 {"n_threads", r.threads},
                                 {"type_k", "f16"},
                                 {"type_v", "f16"},
                                 {"n_prompt", r.n_prompt},
                                 {"n_gen", r.n_gen},
                                 {"test_time", time_buf},
                                 {"avg_ns", static_cast<uint64_t>(r.avg_ns())},
                                 {"stddev_ns", static_cast<uint64_t>(r.stddev_ns())},
                                 {"avg_ts", r.avg_ts()},
                                 {"stddev_ts", r.stddev_ts()},
                                 {"samples_ns", r.samples_ns},
                                 {"samples_ts", r.samples_ts}});
            }
            if (o->json) {
                std::cout << array.dump(2) << "\n";
            } else {
                const char* fields[] = {
                    "build_commit",   "backends", "model_filename", "model_type", "model_size",
                    "model_n_params", "n_batch",  "n_threads",      "type_k",     "type_v",
                    "n_prompt",       "n_gen",    "test_time",      "avg_ns",     "stddev_ns",
                    "avg_ts",         "stddev_ts"};
                std::string header;
                for (const char* f : fields) header += concat(header.empty() ? "" : ",", f);
                std::cout << header << "\n";
                for (const auto& row : array) {
                    std::string line;
                    for (const char* f : fields) {
                        const auto& v = row[f];
                        line +=
                            concat(line.empty() ? "" : ",",
                                   v.is_string() ? "\"" + v.get<std::string>() + "\"" : v.dump());
                    }
                    std::cout << line << "\n";
                }
            }
            return;
        }

        std::printf(
            "| model                          |       size |     params | backend | threads |  "
            "test |                  t/s |\n");
        std::printf(
            "| ------------------------------ | ---------: | ---------: | ------- | ------: | "
            "----: | -------------------: |\n");
        for (const auto& r : results) {
            std::printf("| %-30s | %7.2f MiB | %8.2f M | CPU     | %7d | %5s | %12.2f ± %5.2f |\n",
                        type.c_str(), static_cast<double>(size) / (1024.0 * 1024.0),
                        static_cast<double>(params) / 1e6, r.threads, r.name().c_str(), r.avg_ts(),
                        r.stddev_ts());
        }
        if (o->no_roofline) return;
        const uint64_t per_token = model->bytes_per_token();
        std::printf("\nDecode roofline: %s of weights read per token\n",
                    format_mib(per_token).c_str());
        for (int threads : o->threads) {
            ThreadPool pool(threads, /*pin_threads=*/true);
            const double bandwidth = measure_read_bandwidth(pool);
            for (const auto& r : results) {
                if (r.threads != threads || r.n_gen == 0) continue;
                const double used = static_cast<double>(per_token) * r.avg_ts();
                std::printf(
                    "  %d thread(s), %s: %.1f GB/s of %.1f GB/s measured read bandwidth = %.0f%%\n",
                    threads, r.name().c_str(), used / 1e9, bandwidth / 1e9,
                    100.0 * used / bandwidth);
            }
        }
    });
}

}  // namespace minfer::cli
