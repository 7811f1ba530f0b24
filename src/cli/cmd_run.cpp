// `minfer run MODEL -p PROMPT`: generates an answer and streams it to stdout. A model with a chat
// template gets the prompt as one user message (--raw feeds it as is); --tokens 1,2,3 works on
// token ids and prints ids. Timings go to stderr at the end, or everything as one JSON document.

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/exit_codes.h"
#include "cli/format.h"
#include "cli/grammar_flags.h"
#include "cli/interrupt.h"
#include "cli/model_loading.h"
#include "cli/sampling_flags.h"
#include "cli/standard_output.h"
#include "cli/token_list.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"
#include "runtime/generation.h"
#include "runtime/prompt.h"

namespace minfer::cli {
namespace {

struct RunOptions {
    std::string model;
    std::string prompt;
    std::string prompt_file;
    std::string tokens;
    std::string system;
    std::string template_file;
    std::vector<std::string> stop;
    int64_t n_predict = -1;
    bool raw = false;
    bool json = false;
    bool dump_graph = false;
    ContextFlags context;
    SamplingFlags sampling;
    GrammarFlags grammar;
};

const char* stop_description(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration:
            return "end of generation token";
        case StopReason::StopString:
            return "stop string";
        case StopReason::MaxTokens:
            return "token limit (-n)";
        case StopReason::ContextFull:
            return "the context is full";
        case StopReason::CacheFull:
            return "the KV cache is full";
        case StopReason::Cancelled:
            return "interrupted";
        case StopReason::PromptDone:
            return "end of the prompt";
        case StopReason::NoAllowedToken:
            return "no token may follow under the grammar (banned by the logit bias, none spells "
                   "what it needs next, or it reached its limits)";
    }
    return "?";
}

// The engine at start: the KV cache and the weights' copies: repacked for the CPU (--no-repack:
// none), uploaded to a GPU.
struct EngineStart {
    double ms = 0;
    uint64_t repacked_bytes = 0;  // copies in host memory
    uint64_t gpu_bytes = 0;       // copies on a GPU
};

// "500.9 MB of weights repacked", "480.0 MB of weights on the GPU, 20.9 MB repacked",
// "weights zero-copy".
std::string weight_copies(const EngineStart& start) {
    if (start.gpu_bytes == 0 && start.repacked_bytes == 0) return "weights zero-copy";
    if (start.gpu_bytes == 0)
        return concat(format_mib(start.repacked_bytes), " of weights repacked");
    return concat(format_mib(start.gpu_bytes), " of weights on the GPU",
                  start.repacked_bytes > 0
                      ? concat(", ", format_mib(start.repacked_bytes), " repacked")
                      : std::string());
}

void print_timings(const LoadedModel& loaded, const EngineStart& start, const SequenceResult& r,
                   int64_t n_ctx) {
    const auto& s = r.stats;
    std::fprintf(stderr, "\nminfer: load        %10.1f ms\n", loaded.load_ms);
    std::fprintf(stderr, "minfer: engine      %10.1f ms (%s)\n", start.ms,
                 weight_copies(start).c_str());
    std::fprintf(stderr, "minfer: prompt      %10.1f ms / %6lld tokens (%8.1f tokens/s)\n",
                 s.prompt_ms, static_cast<long long>(s.n_prompt), s.prompt_tokens_per_second());
    std::fprintf(stderr, "minfer: generation  %10.1f ms / %6lld tokens (%8.1f tokens/s)\n",
                 s.generation_ms, static_cast<long long>(s.n_generated),
                 s.generation_tokens_per_second());
    std::fprintf(stderr, "minfer: stopped by  %s%s\n", stop_description(r.stop),
                 r.stop == StopReason::ContextFull
                     ? concat(" (", n_ctx, " tokens; raise --ctx)").c_str()
                     : "");
}

void print_json(const LoadedModel& loaded, const EngineStart& start, const SequenceResult& r,
                std::size_t n_prompt, uint64_t seed) {
    const auto& s = r.stats;
    nlohmann::ordered_json doc = {{"text", r.text},
                                  {"tokens", r.tokens},
                                  {"prompt_tokens", n_prompt},
                                  {"stop_reason", stop_reason_name(r.stop)},
                                  {"seed", seed},
                                  {"timings",
                                   {{"load_ms", loaded.load_ms},
                                    {"engine_ms", start.ms},
                                    {"repacked_bytes", start.repacked_bytes},
                                    {"gpu_weight_bytes", start.gpu_bytes},
                                    {"prompt_n", s.n_prompt},
                                    {"prompt_ms", s.prompt_ms},
                                    {"prompt_per_second", s.prompt_tokens_per_second()},
                                    {"predicted_n", s.n_generated},
                                    {"predicted_ms", s.generation_ms},
                                    {"predicted_per_second", s.generation_tokens_per_second()}}}};
    std::cout << doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

}  // namespace

void add_run_command(CLI::App& app) {
    auto o = std::make_shared<RunOptions>();
    CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
    cmd->add_option("model", o->model, kModelHelpWithDefault);
    auto* prompt = cmd->add_option("-p,--prompt", o->prompt, "The prompt");
    auto* file = cmd->add_option("-f,--file", o->prompt_file, "Read the prompt from a file");
    auto* tokens = cmd->add_option("--tokens", o->tokens,
                                   "Prompt as token ids (1,2,3 or [1, 2, 3]); prints token ids");
    prompt->excludes(file)->excludes(tokens);
    file->excludes(tokens);
    cmd->add_option("-n,--n-predict", o->n_predict,
                    "Tokens to generate (-1: until the end of the answer)")
        ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30))
        ->capture_default_str();
    cmd->add_option("--stop", o->stop, "Stop before this text (repeatable)")
        ->allow_extra_args(false);  // one value each time: a MODEL may follow
    auto* system =
        cmd->add_option("--system", o->system, "System message (with the chat template)");
    auto* raw = cmd->add_flag("--raw", o->raw, "Feed the prompt as is, without the chat template");
    auto* template_file = cmd->add_option("--template", o->template_file,
                                          "Use this Jinja chat template instead of the model's");
    // Token ids and --raw skip the chat template: options of the template would do nothing.
    system->excludes(raw)->excludes(tokens);
    template_file->excludes(raw)->excludes(tokens);
    auto* json = cmd->add_flag(
        "--json", o->json, "Print one JSON result (text, tokens, timings, stop reason) instead");
    cmd->add_flag("--dump-graph", o->dump_graph,
                  "Print the first forward pass's operations (shapes, parameters) and exit")
        ->excludes(json);
    add_context_flags(cmd, o->context);
    add_sampling_flags(cmd, o->sampling);
    add_grammar_flags(cmd, o->grammar);
    cmd->callback([o, prompt, file, tokens, system] {
        if (o->model.empty()) o->model = default_model();
        if (!prompt->count() && !file->count() && !tokens->count()) {
            throw UsageError("give a prompt: -p TEXT, -f FILE or --tokens 1,2,3");
        }
        // Everything the command line says is checked before the model is loaded.
        const SamplingParams sampling = to_sampling_params(o->sampling);
        const bool ids_mode = tokens->count() > 0;
        const std::vector<int32_t> ids =
            ids_mode ? parse_token_list(o->tokens, "--tokens") : std::vector<int32_t>{};
        const std::string text =
            file->count() ? read_file(o->prompt_file, "the prompt file") : o->prompt;
        std::optional<std::string> template_source;
        if (!o->template_file.empty())
            template_source = read_file(o->template_file, "the template file");
        const std::optional<grammar::Grammar> grammar = to_grammar(o->grammar);

        const LoadedModel loaded = load_model_for_cli(o->model, /*quiet=*/o->json, template_source);
        if (ids_mode) check_token_ids(ids, loaded.model->hparams().n_vocab, "--tokens");
        if (system->count() && !loaded.has_template)
            log_warning(
                "--system is ignored: the model has no chat template (give one with --template)");
        const std::optional<std::string> system_text =
            system->count() ? std::optional<std::string>(o->system) : std::nullopt;
        const std::vector<int32_t> input =
            ids_mode ? ids : single_prompt_tokens(loaded, text, o->raw, system_text);
        const auto engine_begin = std::chrono::steady_clock::now();
        Engine engine(loaded.model, loaded.tokenizer, to_engine_options(o->context));
        const auto device = engine.backend().device_transfers();
        const uint64_t gpu_bytes = device ? device->weight_bytes_up : 0;
        const EngineStart start{std::chrono::duration<double, std::milli>(
                                    std::chrono::steady_clock::now() - engine_begin)
                                    .count(),
                                engine.backend().weight_copy_bytes() - gpu_bytes, gpu_bytes};
        if (o->dump_graph) {
            std::cout << engine.graph_for_prompt(input).to_string();
            return;
        }

        SequenceParams params;
        params.prompt = input;
        params.sampling = sampling;
        params.n_predict = o->n_predict;
        params.stop = o->stop;
        if (grammar) params.grammar = loaded.compile_grammar(*grammar);
        InterruptGuard interrupt;
        const bool stream_text = !o->json && !ids_mode;
        const SequenceResult r = generate(
                                     engine, std::move(params),
                                     [&](std::string_view piece) {
                                         if (stream_text) write_streamed(piece);
                                     },
                                     &InterruptGuard::flag())
                                     .result;
        if (o->json) {
            print_json(loaded, start, r, input.size(), sampling.seed);
        } else {
            if (ids_mode) {
                std::string line;
                for (int32_t t : r.tokens) line += concat(line.empty() ? "" : ",", t);
                std::printf("%s\n", line.c_str());
            } else {
                std::printf("\n");
            }
            print_timings(loaded, start, r, engine.n_ctx());
        }
        if (r.stop == StopReason::Cancelled) throw InterruptedByUser{};
    });
}

}  // namespace minfer::cli
