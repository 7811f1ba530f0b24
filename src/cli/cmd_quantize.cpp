// `minfer quantize IN.gguf OUT.gguf TYPE [--threads N]`: converts an F32/F16/BF16 model to a
// quantization mix (the conversion itself is quant/model_quantizer).

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/model_loading.h"
#include "cli/progress_bar.h"
#include "core/atomic_output_file.h"
#include "core/cpu_set.h"
#include "core/error.h"
#include "core/terminal_text.h"
#include "quant/model_quantizer.h"

namespace minfer::cli {
namespace {

// The temporary output, removed by the signal handler so that Ctrl-C leaves nothing behind.
char g_temporary_path[4096] = {};

extern "C" void remove_temporary_and_die(int signal_number) {
    if (g_temporary_path[0] != '\0') ::unlink(g_temporary_path);
    ::signal(signal_number, SIG_DFL);
    ::raise(signal_number);
}

// Installs the handler for SIGINT/SIGTERM/SIGHUP for its lifetime.
class TemporaryCleanupOnSignal {
  public:
    TemporaryCleanupOnSignal() {
        struct sigaction action {};
        action.sa_handler = remove_temporary_and_die;
        sigemptyset(&action.sa_mask);
        for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &action, &previous_[i]);
    }
    ~TemporaryCleanupOnSignal() {
        for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &previous_[i], nullptr);
        g_temporary_path[0] = '\0';
    }
    TemporaryCleanupOnSignal(const TemporaryCleanupOnSignal&) = delete;
    TemporaryCleanupOnSignal& operator=(const TemporaryCleanupOnSignal&) = delete;

    static void remember(const std::filesystem::path& path) {
        const std::string& s = path.native();
        if (s.size() >= sizeof(g_temporary_path)) return;
        std::memcpy(g_temporary_path, s.c_str(), s.size() + 1);
    }

  private:
    static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction previous_[3]{};
};

std::string mix_names() {
    std::string names;
    for (QuantMix mix : all_quant_mixes()) {
        if (!names.empty()) names += ", ";
        names += quant_mix_name(mix);
    }
    return names;
}

}  // namespace

void add_quantize_command(CLI::App& app) {
    struct Options {
        std::string input;
        std::string output;
        std::string type;
        int threads = 0;  // 0: every usable CPU
    };
    auto opts = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "quantize", "Convert an F32/F16/BF16 model to a quantized type, as llama-quantize does");
    cmd->add_option("input", opts->input,
                    "GGUF model to read (F32, F16 or BF16 weights): a path or a reference "
                    "(hf:, ollama:, URL)")
        ->required();
    cmd->add_option("output", opts->output, "GGUF file to write (never the input)")->required();
    cmd->add_option("type", opts->type, "Quantization: " + mix_names())->required();
    cmd->add_option("--threads,-t", opts->threads, "Worker threads (default: every usable CPU)")
        ->check(CLI::Range(0, 1024));
    cmd->callback([opts] {
        const auto mix = quant_mix_from_name(opts->type);
        if (!mix) {
            throw UsageError(concat("unknown quantization type '", opts->type,
                                    "'; expected one of ", mix_names()));
        }
        // OUT is checked before a reference's download, which may take minutes.
        resolve_output_target(opts->output);
        const auto input = resolve_model_for_cli(opts->input);
        ProgressBar bar;  // "[#####-----]  45%  4/39  blk.3.ffn_up.weight" on a terminal
        ModelQuantizeOptions options;
        options.threads = clamp_thread_count(opts->threads, "-t");
        if (bar.enabled()) {
            options.on_progress = [&bar](const QuantizeProgress& p) {
                const double done =
                    p.values_total == 0 ? 1.0 : static_cast<double>(p.values_done) / p.values_total;
                bar.update(done,
                           concat(p.tensor_index + 1, "/", p.tensor_count, "  ", p.tensor_name));
            };
        }
        options.on_temporary_file = TemporaryCleanupOnSignal::remember;

        const auto start = std::chrono::steady_clock::now();
        ModelQuantizeResult result;
        {
            const TemporaryCleanupOnSignal cleanup;
            try {
                result = quantize_model(input, opts->output, *mix, options);
            } catch (...) {
                bar.finish();
                throw;
            }
        }
        bar.finish();
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        // OUT as given by the user may hold control characters: escaped like every message.
        std::printf("%s: %s -> %s (%s), %zu of %zu tensors quantized, %d fallback(s), %.1f s\n",
                    escape_for_terminal(opts->output).c_str(),
                    format_mib(result.input_bytes).c_str(), format_mib(result.output_bytes).c_str(),
                    std::string(quant_mix_name(*mix)).c_str(), result.quantized_count,
                    result.tensors.size(), result.fallback_count, seconds);
    });
}

}  // namespace minfer::cli
