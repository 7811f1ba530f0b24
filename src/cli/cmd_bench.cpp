// `minfer bench MODEL`: llama-bench's measurements, through the engine. Prompt processing (ppN:
// N tokens in one go, in chunks of --batch) and token generation (tgN: N forward passes of one
// token), each repeated after a warm-up, as mean ± standard deviation of tokens/s; with
// -np/--n-parallel, N sequences prefilled with their own prompts of -p tokens then decoding -n
// tokens together (aggregate tokens/s, as llama-batched-bench); with -d/--n-depth, after that many
// tokens already in the cache. A markdown table (default), --json (an array of objects in
// llama-bench's shape) or --csv. Also the decode roofline: weight bytes read per step x steps/s
// against the read bandwidth measured right after each repetition.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include "backend/device.h"
#include "backend/vulkan/vulkan_devices.h"
#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/format.h"
#include "cli/model_loading.h"
#include "core/cpu_set.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory_limits.h"
#include "core/terminal_text.h"
#include "core/thread_pool.h"
#include "kernels/kernel_path.h"
#include "kernels/machine_limits.h"
#include "kernels/matmul.h"
#include "model/kv_spec.h"
#include "quant/quant_mix.h"
#include "runtime/benchmark.h"
#include "runtime/model_summary.h"

namespace minfer::cli {
namespace {

// The roofline's bandwidth samples: 64 MiB (twice the L3 of the development machine, 1-2 ms)
// after every 16th decode step; a Qwen2 0.5B step takes about 10 ms, so the samples add about
// 1 % to a test's wall time and nothing to its measured steps.
constexpr int64_t kStepsPerSample = 16;
constexpr std::size_t kSampleBytes = std::size_t{64} << 20;

struct BenchOptions {
    std::string model;
    std::string n_prompt = "512", n_gen = "128", threads, n_parallel, n_depth = "0";
    int repetitions = 5;
    int64_t batch = 512;
    std::string device = "cpu";
    int gpu_layers = -1;  // -ngl
    std::string cache_type = "f16";
    bool batch_invariant = true;
    bool repack = true;
    bool json = false;
    bool csv = false;
    bool no_roofline = false;
};

struct TestResult {
    BenchTest test;
    int threads = 0;
    bool parallel_mode = false;   // -np given: the tg rows follow a prompt of -p tokens
    double load_ms = 0;           // the model (mapping, parsing, tokenizer)
    double prepare_ms = 0;        // the engine at start, with the weights' repacking
    uint64_t repacked_bytes = 0;  // weight copies the backend made (0: --no-repack)
    std::vector<double> samples_ns;
    std::vector<double> samples_ts;
    std::vector<double> samples_bytes;      // weight bytes read per step (tg; 0: not counted)
    std::vector<double> samples_bandwidth;  // read bandwidth after each repetition (tg, roofline)

    double avg_ts() const { return mean(samples_ts); }
    double stddev_ts() const { return stddev(samples_ts); }
    double avg_ns() const { return mean(samples_ns); }
    double stddev_ns() const { return stddev(samples_ns); }
    // "pp512", "tg128", "tg128 @ d4096", "pp128+tg64" (-np)
    std::string name() const {
        std::string s = test.n_gen == 0 ? concat("pp", test.n_prompt)
                        : parallel_mode && test.n_prompt > 0
                            ? concat("pp", test.n_prompt, "+tg", test.n_gen)
                            : concat("tg", test.n_gen);
        if (test.n_depth > 0) s += concat(" @ d", test.n_depth);
        return s;
    }

    static double mean(const std::vector<double>& v) {
        return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    }
    static double stddev(const std::vector<double>& v) {
        if (v.size() < 2) return 0.0;
        const double m = mean(v);
        double sq = 0;
        for (double x : v) sq += (x - m) * (x - m);
        return std::sqrt(sq / static_cast<double>(v.size() - 1));
    }
};

// "qwen2 0.5B Q4_0", like llama-bench's model_type; below 50 M parameters the size is in M
// ("llama 0.3M F32" rather than "0.0B").
// llama-bench's n_gpu_layers: the layers the device runs (0 on the CPU backends).
int64_t gpu_layer_count(const BenchOptions& o, const Model& model) {
    const DeviceChoice device = device_choice(o.device, o.gpu_layers);
    const int64_t n_layers = model.hparams().n_layer;
    if (device.kind != DeviceKind::kVulkan) return 0;
    return device.gpu_layers < 0 ? n_layers : std::min<int64_t>(device.gpu_layers, n_layers);
}

std::string model_type(const Model& model) {
    const ModelSummary s = summarize_model(model);
    return concat(s.architecture, " ", s.parameter_size, " ", s.quantization);
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

// The tests in llama-bench's order: every prompt length, then every generation length (with -np:
// one combined test per prompt and generation length), for each depth and parallel count.
std::vector<BenchTest> plan_tests(const std::vector<int>& prompts, const std::vector<int>& gens,
                                  const std::vector<int>& depths, const std::vector<int>& parallel,
                                  bool parallel_mode) {
    std::vector<BenchTest> tests;
    for (int np : parallel) {
        for (int d : depths) {
            if (!parallel_mode) {
                for (int p : prompts) {
                    if (p > 0) tests.push_back({p, 0, d, 1});
                }
                for (int n : gens) {
                    if (n > 0) tests.push_back({0, n, d, 1});
                }
                continue;
            }
            for (int p : prompts) {
                for (int n : gens) {
                    if (n > 0) tests.push_back({p, n, d, np});
                }
            }
        }
    }
    return tests;
}

// A CSV field (RFC 4180: quotes doubled) of a string that may hold a file name: control
// characters and invalid UTF-8 escaped, as everywhere minfer prints text from outside.
std::string csv_quoted(const nlohmann::ordered_json& value) {
    std::string out = "\"";
    for (const char c : escape_for_terminal(value.get<std::string>())) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

// The kernel that multiplies each weight type of the model's matrices on this device, e.g.
// {"q4_0": "AVX3 VNNI interleaved", "f32": "AVX3 float panels"} (matmul_kernel_name: the
// engine's batch-invariant kernels); a GPU or the reference backend names itself.
nlohmann::ordered_json kernels_by_type(const BenchOptions& o, const Model& model) {
    std::vector<GgmlType> types;
    for (const TensorInfo* t : model.file().tensors()) {
        if (t->n_dims >= 2 && matmul_supports(t->type) &&
            std::find(types.begin(), types.end(), t->type) == types.end()) {
            types.push_back(t->type);
        }
    }
    const bool cpu = parse_device(o.device).kind == DeviceKind::kCpu;
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (GgmlType type : types) {
        out[std::string(type_name(type))] =
            cpu ? matmul_kernel_name(type, o.repack) : backend_label(parse_device(o.device));
    }
    return out;
}

// A decode row against the memory bandwidth: the weight bytes every step reads (whatever the
// number of sequences it decodes; of a mixture of experts, the experts its tokens picked, counted
// by the backend: a step of several sequences reads the union of theirs) times the steps a second,
// each repetition against the bandwidth measured just after it (the machine's moves from minute
// to minute), as means over the repetitions.
struct Roofline {
    double step_bytes = 0;       // weight bytes one forward pass reads
    double read_bps = 0;         // of which per second
    double bandwidth_bps = 0;    // the read bandwidth measured beside the steps
    double fraction = 0;         // read_bps / bandwidth_bps, repetition by repetition
};

std::optional<Roofline> roofline_of(const TestResult& r, const Model& model) {
    if (r.test.n_gen == 0 || r.samples_bandwidth.empty()) return std::nullopt;
    const auto per_step = static_cast<double>(model.bytes_per_token());
    std::vector<double> bytes, used, fraction;
    for (std::size_t i = 0; i < r.samples_ts.size(); ++i) {
        const double steps = r.samples_ts[i] / static_cast<double>(r.test.n_parallel);
        bytes.push_back(r.samples_bytes[i] > 0 ? r.samples_bytes[i] : per_step);
        used.push_back(bytes.back() * steps);
        fraction.push_back(used.back() / r.samples_bandwidth[i]);
    }
    return Roofline{TestResult::mean(bytes), TestResult::mean(used),
                    TestResult::mean(r.samples_bandwidth), TestResult::mean(fraction)};
}

void print_machine_readable(const BenchOptions& o, const std::vector<TestResult>& results,
                            const Model& model) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    char time_buf[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(time_buf, sizeof(time_buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    for (const auto& r : results) {
        array.push_back({{"build_commit", MINFER_VERSION},
                         {"cpu_info", cpu_brand()},
                         {"backends", backend_label(parse_device(o.device))},
                         {"gpu_info", gpu_info(parse_device(o.device))},
                         {"kernels", kernels_in_use()},
                         {"kernels_by_type", kernels_by_type(o, model)},
                         {"model_filename", model.file().path().string()},
                         {"model_type", model_type(model)},
                         {"model_size", model.weight_bytes()},
                         {"model_n_params", model.n_params()},
                         {"n_batch", o.batch},
                         {"n_threads", r.threads},
                         {"n_gpu_layers", gpu_layer_count(o, model)},
                         {"type_k", o.cache_type},
                         {"type_v", o.cache_type},
                         {"batch_invariant", o.batch_invariant},
                         {"repack", o.repack},
                         {"repacked_bytes", r.repacked_bytes},
                         {"load_ms", r.load_ms},
                         {"prepare_ms", r.prepare_ms},
                         {"n_prompt", r.test.n_prompt},
                         {"n_gen", r.test.n_gen},
                         {"n_depth", r.test.n_depth},
                         {"n_parallel", r.test.n_parallel},
                         {"test_time", time_buf},
                         {"avg_ns", static_cast<uint64_t>(r.avg_ns())},
                         {"stddev_ns", static_cast<uint64_t>(r.stddev_ns())},
                         {"avg_ts", r.avg_ts()},
                         {"stddev_ts", r.stddev_ts()},
                         {"samples_ns", r.samples_ns},
                         {"samples_ts", r.samples_ts}});
        // The decode roofline (tg rows, unless --no-roofline): bytes per step, their rate, the
        // read bandwidth measured beside the steps, and the fraction of it.
        if (const std::optional<Roofline> line = roofline_of(r, model)) {
            array.back()["decode_bytes_per_step"] = static_cast<uint64_t>(line->step_bytes);
            array.back()["decode_read_bps"] = line->read_bps;
            array.back()["read_bandwidth_bps"] = line->bandwidth_bps;
            array.back()["bandwidth_fraction"] = line->fraction;
        }
    }
    if (o.json) {
        std::cout << array.dump(2) << "\n";
        return;
    }
    const char* fields[] = {"build_commit",   "cpu_info",       "gpu_info",        "backends",
                            "kernels",        "model_filename", "model_type",      "model_size",
                            "model_n_params", "n_batch",        "n_threads",       "n_gpu_layers",
                            "type_k",         "type_v",         "batch_invariant", "repack",
                            "repacked_bytes", "load_ms",        "prepare_ms",      "n_prompt",
                            "n_gen",          "n_depth",        "n_parallel",      "test_time",
                            "avg_ns",         "stddev_ns",      "avg_ts",          "stddev_ts"};
    std::string header;
    for (const char* f : fields) header += concat(header.empty() ? "" : ",", f);
    std::cout << header << "\n";
    for (const auto& row : array) {
        std::string line;
        for (const char* f : fields) {
            const auto& v = row[f];
            line += concat(line.empty() ? "" : ",", v.is_string() ? csv_quoted(v) : v.dump());
        }
        std::cout << line << "\n";
    }
}

void print_table(const std::vector<TestResult>& results, const Model& model,
                 const std::string& backend) {
    const std::string type = model_type(model);
    std::printf(
        "| model                          |       size |     params | backend | threads |  np | "
        "           test |                  t/s |\n");
    std::printf(
        "| ------------------------------ | ---------: | ---------: | ------- | ------: | --: | "
        "--------------: | -------------------: |\n");
    for (const auto& r : results) {
        std::printf(
            "| %-30s | %7.2f MiB | %8.2f M | %-7s | %7d | %3lld | %15s | %12.2f ± %5.2f |\n",
            type.c_str(), static_cast<double>(model.weight_bytes()) / (1024.0 * 1024.0),
            static_cast<double>(model.n_params()) / 1e6, backend.c_str(), r.threads,
            static_cast<long long>(r.test.n_parallel), r.name().c_str(), r.avg_ts(), r.stddev_ts());
    }
}

// What loading cost: the model, then the engine at start (with the weights' repacking or their
// upload to a GPU), the process's peak resident memory over all the tests (the copies, or the
// mapped file's pages), and what ran the tests.
void print_load(const std::vector<TestResult>& results, std::optional<uint64_t> peak,
                const BenchOptions& o, const Model& model) {
    const std::string& device = o.device;
    if (results.empty()) return;
    const TestResult& r = results.front();
    const bool gpu = parse_device(device).kind == DeviceKind::kVulkan;
    std::printf(
        "\nLoad: model %.1f ms, engine %.1f ms (%s)\n", r.load_ms, r.prepare_ms,
        gpu ? concat(format_mib(r.repacked_bytes), " of weights copied to the device").c_str()
        : r.repacked_bytes > 0 ? concat(format_mib(r.repacked_bytes),
                                        " of weights repacked; --no-repack keeps "
                                        "them zero-copy in the mapped file")
                                     .c_str()
                               : "weights zero-copy in the mapped file");
    if (peak) std::printf("Peak resident memory: %s\n", format_mib(*peak).c_str());
    if (gpu) {
        std::printf("Device: %s\n", escape_for_terminal(gpu_info(parse_device(device))).c_str());
        return;
    }
    const std::string cpu = cpu_brand();
    std::printf("Kernels: %s%s\n", kernels_in_use().c_str(),
                cpu.empty() ? "" : concat(" on ", escape_for_terminal(cpu)).c_str());
    const nlohmann::ordered_json by_type = kernels_by_type(o, model);
    for (const auto& [type, kernel] : by_type.items()) {
        std::printf("  %-6s %s\n", type.c_str(), kernel.get<std::string>().c_str());
    }
}

void print_roofline(const std::vector<TestResult>& results, const Model& model) {
    if (std::all_of(results.begin(), results.end(),
                    [](const TestResult& r) { return r.samples_bandwidth.empty(); })) {
        return;  // no decoding test, or no memory for the read buffer
    }
    const uint64_t per_step = model.bytes_per_token();
    std::printf("\nDecode roofline: %s of weights read per forward pass\n",
                format_mib(per_step).c_str());
    for (const auto& r : results) {
        const std::optional<Roofline> line = roofline_of(r, model);
        if (!line) continue;
        const std::string read =
            std::abs(line->step_bytes - static_cast<double>(per_step)) >
                    0.005 * static_cast<double>(per_step)
                ? concat(" (", format_mib(static_cast<uint64_t>(line->step_bytes)), " a step)")
                : "";
        std::printf(
            "  %d thread(s), %s x%lld%s: %.1f GB/s of %.1f GB/s read bandwidth (the higher of "
            "samples between the decode steps and a read after them) = %.0f%%\n",
            r.threads, r.name().c_str(), static_cast<long long>(r.test.n_parallel), read.c_str(),
            line->read_bps / 1e9, line->bandwidth_bps / 1e9, 100.0 * line->fraction);
    }
}

}  // namespace

void add_bench_command(CLI::App& app) {
    auto o = std::make_shared<BenchOptions>();
    CLI::App* cmd = app.add_subcommand(
        "bench", "Measure prompt processing and generation speed, like llama-bench");
    cmd->add_option("model", o->model, kModelHelp)->required();
    cmd->add_option("-p,--n-prompt", o->n_prompt,
                    "Prompt lengths to test, comma-separated (0 skips)")
        ->capture_default_str();
    cmd->add_option("-n,--n-gen", o->n_gen, "Generation lengths to test, comma-separated (0 skips)")
        ->capture_default_str();
    cmd->add_option(
        "--n-parallel", o->n_parallel,
        "(or -np) Sequences decoding together, comma-separated: each is prefilled with its own "
        "random prompt of -p tokens, then all decode -n tokens; t/s is the aggregate of the "
        "generated tokens, timed with the prompts (as a server's clients pay for them) where -p "
        "is not 0, over the decode steps alone with -p 0 (at most -b)");
    cmd->add_option("-d,--n-depth", o->n_depth,
                    "Tokens already in the cache before each test, comma-separated")
        ->capture_default_str();
    cmd->add_option("-t,--threads", o->threads,
                    "Thread counts to test, comma-separated (default: every usable CPU; more "
                    "than the usable CPUs are refused)");
    cmd->add_option("-r,--repetitions", o->repetitions, "Repetitions of each test")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    cmd->add_option("-b,--batch", o->batch, "The most tokens one forward pass evaluates")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
        ->capture_default_str();
    cmd->add_option("--cache-type", o->cache_type, "KV cache type: f16, f32 or q8_0")
        ->check(CLI::IsMember({"f16", "f32", "q8_0"}))
        ->capture_default_str();
    add_device_flags(cmd, o->device, o->gpu_layers);
    cmd->add_flag("--batch-invariant,!--no-batch-invariant", o->batch_invariant,
                  "Bit-identical results whatever the batch (default; see run --help)");
    cmd->add_flag(
        "--repack,!--no-repack", o->repack,
        "Interleaved copies of the weights for the CPU kernels (default; see run --help)");
    auto* json = cmd->add_flag("--json", o->json, "Print a JSON array (llama-bench's fields)");
    cmd->add_flag("--csv", o->csv, "Print CSV (llama-bench's fields)")->excludes(json);
    cmd->add_flag("--no-roofline", o->no_roofline,
                  "Skip the memory-bandwidth measurement (the roofline, and --json's bandwidth "
                  "fields)");
    cmd->callback([o] {
        const auto prompts = parse_int_list(o->n_prompt, "--n-prompt", 0);
        const auto gens = parse_int_list(o->n_gen, "--n-gen", 0);
        const auto depths = parse_int_list(o->n_depth, "--n-depth", 0);
        const bool parallel_mode = !o->n_parallel.empty();
        const auto parallel =
            parallel_mode ? parse_int_list(o->n_parallel, "--n-parallel", 1) : std::vector<int>{1};
        const auto threads = o->threads.empty() ? std::vector<int>{usable_cpu_count()}
                                                : parse_int_list(o->threads, "--threads", 1);
        const int n_cpus = usable_cpu_count();
        for (int t : threads) {
            if (t > n_cpus) {
                throw UsageError(
                    concat("bench -t ", t, ": ", cpus_available_text(n_cpus),
                           "; measuring more threads than CPUs measures the scheduler"));
            }
        }
        for (int np : parallel) {
            // The sequences decode together only if one step holds a token of each: beyond -b,
            // they would take turns and the row would not measure what its label says.
            if (np > o->batch) {
                throw UsageError(concat("-np ", np, " is more than -b ", o->batch,
                                        ": one step decodes at most -b sequences; raise -b"));
            }
        }
        const std::vector<BenchTest> tests =
            plan_tests(prompts, gens, depths, parallel, parallel_mode);
        if (tests.empty()) {
            throw UsageError(
                parallel_mode ? "nothing to measure: with -np every test decodes, and every -n is 0"
                              : "nothing to measure: every -p and -n is 0");
        }

        const LoadedModel loaded = load_model_for_cli(o->model, /*quiet=*/true);
        EngineOptions options;
        options.n_batch = o->batch;
        options.kv_type = parse_kv_cache_type(o->cache_type);
        options.batch_invariant = o->batch_invariant;
        options.repack_weights = o->repack;
        options.device = device_choice(o->device, o->gpu_layers);
        options.trace = trace_from_environment();
        options.memory_advice = "; lower -p, -n, -d or -np, or use --cache-type q8_0";
        int64_t max_kv = 0;
        for (const BenchTest& t : tests) {
            options.n_ctx = std::max(options.n_ctx, bench_positions(t));
            max_kv = std::max(max_kv, bench_positions(t) * t.n_parallel);
        }
        options.kv_tokens = max_kv;

        std::mt19937 rng(1234);
        std::vector<TestResult> results;
        const bool roofline = !o->no_roofline;
        // The peak resident memory of the model and the engine, without the roofline's read
        // buffer (resident whole while it exists, so its size comes off the peak measured then).
        std::optional<uint64_t> peak;
        const auto note_peak = [&peak](uint64_t less) {
            if (const auto now = peak_resident_bytes())
                peak = std::max(peak.value_or(0), *now > less ? *now - less : 0);
        };
        for (int n : threads) {
            options.n_threads = n;
            const auto start = std::chrono::steady_clock::now();
            Engine engine(loaded.model, loaded.tokenizer, options);
            const double prepare_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
            note_peak(0);
            const auto pool = shared_thread_pool(n, /*pin_threads=*/true);
            std::unique_ptr<ReadBandwidthProbe> probe;
            if (roofline && std::any_of(tests.begin(), tests.end(),
                                        [](const BenchTest& t) { return t.n_gen > 0; })) {
                try {
                    probe = std::make_unique<ReadBandwidthProbe>(*pool);
                } catch (const LimitError& e) {
                    log_warning(concat(e.what(), " for the bandwidth measurement: no roofline"));
                }
            }
            for (const BenchTest& t : tests) {
                TestResult r{t,
                             n,
                             parallel_mode,
                             loaded.load_ms,
                             prepare_ms,
                             engine.backend().weight_copy_bytes(),
                             {},
                             {},
                             {},
                             {}};
                run_bench_test(engine, t, rng);  // warm-up: page the weights in, wake the pool
                for (int rep = 0; rep < o->repetitions; ++rep) {
                    // The bandwidth is sampled between the decode steps (every 16th and the last;
                    // not timed), since this machine's moves within seconds: the samples' bytes
                    // over their time, as the steps' rate is. The roofline compares the steps
                    // with the higher of that and a whole read right after them: a sample can
                    // catch the host at a bad moment too, and the figure is to flatter nothing.
                    double sampled_seconds = 0;
                    int bandwidth_samples = 0;
                    const auto sample = [&](int64_t step) {
                        if (!probe || (step % kStepsPerSample != kStepsPerSample - 1 &&
                                       step != t.n_gen - 1)) {
                            return;
                        }
                        sampled_seconds +=
                            static_cast<double>(kSampleBytes) / probe->measure_slice(kSampleBytes);
                        ++bandwidth_samples;
                    };
                    const BenchRun run = run_bench_test(engine, t, rng, sample);
                    r.samples_ns.push_back(run.ns);
                    r.samples_ts.push_back(static_cast<double>(bench_tokens(t)) * 1e9 / run.ns);
                    r.samples_bytes.push_back(run.weight_bytes_per_step);
                    if (bandwidth_samples > 0) {
                        r.samples_bandwidth.push_back(std::max(
                            static_cast<double>(kSampleBytes) * bandwidth_samples / sampled_seconds,
                            probe->measure()));
                    }
                }
                results.push_back(std::move(r));
            }
            note_peak(probe ? probe->bytes() : 0);
            if (probe) {
                probe.reset();
                reset_peak_resident();
            }
        }
        if (o->json || o->csv) {
            print_machine_readable(*o, results, *loaded.model);
            return;
        }
        print_table(results, *loaded.model, backend_label(parse_device(o->device)));
        print_load(results, peak, *o, *loaded.model);
        if (roofline) print_roofline(results, *loaded.model);
    });
}

}  // namespace minfer::cli
