#include "cli/context_flags.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "backend/device.h"
#include "core/cpu_set.h"
#include "core/error.h"
#include "core/log.h"
#include "gguf/ggml_type.h"
#include "model/kv_spec.h"

namespace minfer::cli {

void add_device_flags(CLI::App* cmd, std::string& device, int& gpu_layers) {
    cmd->add_option("--device", device,
                    "Backend that runs the model: cpu, vulkan (the first Vulkan GPU), vulkan:N "
                    "(minfer --list-devices lists them), or reference (plain loops in double: the "
                    "slow oracle for checking a kernel)")
        ->check([](const std::string& text) {
            try {
                require_device_available(parse_device(text));
                return std::string();
            } catch (const Error& e) {
                return std::string(e.what());
            }
        })
        ->capture_default_str();
    cmd->add_option("--gpu-layers", gpu_layers,
                    "(or -ngl) With --device vulkan: the last N layers and the output on the GPU, "
                    "the layers before on the CPU, for a model larger than the GPU's memory; 0 "
                    "runs every layer on the CPU (default: every layer on the GPU)")
        ->check(CLI::Range(0, 1 << 20));
}

DeviceChoice device_choice(const std::string& device, int gpu_layers) {
    DeviceChoice choice = parse_device(device);
    if (choice.kind != DeviceKind::kVulkan) {
        if (gpu_layers <= 0) return choice;  // -ngl 0: every layer on the CPU, as asked
        static std::once_flag warned;
        std::call_once(warned, [&] {
            log_warning(concat("-ngl ", gpu_layers, " is ignored: --device ", device,
                               " runs every layer (it places layers on a Vulkan GPU)"));
        });
        return choice;
    }
    choice.gpu_layers = gpu_layers;
    return choice;
}

void add_context_flags(CLI::App* cmd, ContextFlags& f) {
    add_device_flags(cmd, f.device, f.gpu_layers);
    cmd->add_option("-t,--threads", f.threads,
                    "Threads to use (default and maximum: the CPUs this process may use)")
        ->check(CLI::Range(0, kMaxThreads));
    cmd->add_option("-c,--ctx", f.ctx, "Context length in tokens (default: min(4096, the model's))")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
    cmd->add_option("-b,--batch", f.batch,
                    "The most tokens one forward pass evaluates (prompts go in chunks of it)")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))
        ->capture_default_str();
    cmd->add_option("--cache-type", f.cache_type, "KV cache type: f16, f32 or q8_0")
        ->check(CLI::IsMember({"f16", "f32", "q8_0"}))
        ->capture_default_str();
    cmd->add_flag("--no-pin-threads", f.no_pin_threads,
                  "Let the OS move threads between CPUs (default: pinned)");
    cmd->add_flag("--batch-invariant,!--no-batch-invariant", f.batch_invariant,
                  "Bit-identical logits for a sequence whatever else is in its batch and however "
                  "its prompt was chunked (default; --no-batch-invariant decodes one token with "
                  "GEMV kernels instead, faster on some CPUs: see README)");
    cmd->add_flag("--repack,!--no-repack", f.repack,
                  "Copy the weights at load into the interleaved layout the CPU kernels decode "
                  "fastest (default where the CPU has those kernels: AVX-512 or AVX2; same results "
                  "bit for bit); --no-repack keeps them zero-copy in the mapped file");
}

namespace {

// Prints each op of one forward pass (MINFER_TRACE=N: the N-th, default the first) to stderr.
class Tracer {
  public:
    explicit Tracer(int target) : target_(target) {}
    void operator()(const Op& op, double micros) {
        if (op.type == OpType::GetRows) ++graphs_;
        if (graphs_ != target_) return;
        total_ += micros;
        const std::string name = op.layer >= 0 ? concat("blk.", op.layer, ".", op.label) : op.label;
        std::fprintf(stderr, "trace: %-24s %-13s [%5lld, %6lld] %10.1f us  (total %.1f us)%s\n",
                     name.c_str(), op_type_name(op.type), static_cast<long long>(op.rows),
                     static_cast<long long>(op.width), micros, total_,
                     weight_read(op, micros).c_str());
    }

  private:
    // A matrix's type, size and read rate: "  q4_0 2.45 MB 30.1 GB/s" (what a decode step reads
    // of it, so the slow matrices stand out; "" for other ops and for experts, read in part).
    static std::string weight_read(const Op& op, double micros) {
        if (op.type != OpType::MatMul || op.weight == nullptr || micros <= 0) return "";
        const double bytes = static_cast<double>(op.weight->data.size());
        const std::string type(type_name(op.weight->type));
        char text[64];
        std::snprintf(text, sizeof text, "  %s %.2f MB %.1f GB/s", type.c_str(), bytes * 1e-6,
                      bytes * 1e-3 / micros);
        return text;
    }

    int target_;
    int graphs_ = 0;
    double total_ = 0;
};

}  // namespace

EngineOptions to_engine_options(const ContextFlags& f) {
    EngineOptions o;
    o.device = device_choice(f.device, f.gpu_layers);
    // Clamped here, where the flag's name is known, so the warning names it; 0 stays "all".
    o.n_threads = f.threads == 0 ? 0 : clamp_thread_count(f.threads, "-t");
    o.n_ctx = f.ctx;
    o.n_batch = f.batch;
    o.kv_type = parse_kv_cache_type(f.cache_type);
    o.pin_threads = !f.no_pin_threads;
    o.batch_invariant = f.batch_invariant;
    o.repack_weights = f.repack;
    o.trace = trace_from_environment();
    return o;
}

std::function<void(const Op&, double)> trace_from_environment() {
    const char* trace = std::getenv("MINFER_TRACE");
    if (trace == nullptr || std::string(trace) == "0" || std::string(trace).empty()) return {};
    const int target = std::max(1, std::atoi(trace));
    auto tracer = std::make_shared<Tracer>(target);
    return [tracer](const Op& op, double micros) { (*tracer)(op, micros); };
}

}  // namespace minfer::cli
