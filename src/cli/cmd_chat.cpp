// `minfer chat MODEL`: an interactive conversation with the model's chat template. The KV cache
// keeps the conversation, so each turn evaluates only its new tokens. On a terminal: line editing
// and history (libedit), /clear, /exit or Ctrl-D, Ctrl-C stops the current answer. With stdin not a
// terminal, every line is one user message, so a conversation can be scripted.

#include <editline/readline.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/exit_codes.h"
#include "cli/grammar_flags.h"
#include "cli/interrupt.h"
#include "cli/model_loading.h"
#include "cli/sampling_flags.h"
#include "cli/standard_input.h"
#include "cli/standard_output.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"
#include "runtime/chat_session.h"

namespace minfer::cli {
namespace {

struct ChatOptions {
    std::string model;
    std::string system;
    std::string template_file;
    int64_t n_predict = -1;
    bool stats = false;
    ContextFlags context;
    SamplingFlags sampling;
    GrammarFlags grammar;
};

// One line of input: from libedit on a terminal, from stdin otherwise. nullopt at the end.
class LineReader {
  public:
    LineReader() : interactive_(::isatty(STDIN_FILENO) == 1) {
        if (interactive_) using_history();
    }
    bool interactive() const { return interactive_; }

    std::optional<std::string> next() {
        if (!interactive_) return read_standard_input_line();
        while (true) {
            char* raw = readline("> ");
            if (raw == nullptr) {
                if (InterruptGuard::flag().load()) {  // Ctrl-C at the prompt: a fresh prompt
                    InterruptGuard::clear();
                    std::printf("\n");
                    continue;
                }
                return std::nullopt;
            }
            std::string line(raw);
            std::free(raw);
            if (!line.empty()) add_history(line.c_str());
            return line;
        }
    }

  private:
    bool interactive_;
};

}  // namespace

void add_chat_command(CLI::App& app) {
    auto o = std::make_shared<ChatOptions>();
    CLI::App* cmd = app.add_subcommand(
        "chat", "Talk with a model in the terminal (or one message per stdin line)");
    cmd->add_option("model", o->model, kModelHelpWithDefault);
    cmd->add_option("--system", o->system, "System message");
    cmd->add_option("--template", o->template_file,
                    "Use this Jinja chat template instead of the model's");
    cmd->add_option("-n,--n-predict", o->n_predict,
                    "Tokens per answer at most (-1: until the answer ends)")
        ->check(CLI::Range(int64_t{-1}, int64_t{1} << 30))
        ->capture_default_str();
    cmd->add_flag("--stats", o->stats, "After each answer, print token counts and speed to stderr");
    add_context_flags(cmd, o->context);
    add_sampling_flags(cmd, o->sampling);
    add_grammar_flags(cmd, o->grammar);
    cmd->callback([o] {
        if (o->model.empty()) o->model = default_model();
        const SamplingParams sampling = to_sampling_params(o->sampling);
        if (::isatty(STDIN_FILENO) != 1) require_readable_standard_input();
        std::optional<std::string> template_source;
        if (!o->template_file.empty())
            template_source = read_file(o->template_file, "the template file");
        const std::optional<grammar::Grammar> grammar = to_grammar(o->grammar);
        const LoadedModel loaded = load_model_for_cli(o->model, false, template_source);
        Engine engine(loaded.model, loaded.tokenizer, to_engine_options(o->context));
        ChatSession session(
            engine, loaded,
            o->system.empty() ? std::nullopt : std::optional<std::string>(o->system));
        SequenceParams params;
        params.sampling = sampling;
        params.n_predict = o->n_predict;
        if (grammar) params.grammar = loaded.compile_grammar(*grammar);  // every answer

        InterruptGuard interrupt;
        LineReader reader;
        if (reader.interactive()) {
            std::printf(
                "minfer chat: /clear starts over, /exit or Ctrl-D quits, Ctrl-C stops an answer\n");
        }
        while (auto line = reader.next()) {
            if (*line == "/exit" || *line == "/quit") break;
            if (*line == "/clear") {
                session.clear();
                if (reader.interactive()) std::printf("(conversation cleared)\n");
                continue;
            }
            if (line->empty()) continue;
            InterruptGuard::clear();
            try {
                const SequenceResult r =
                    session.reply(*line, params, write_streamed, &InterruptGuard::flag());
                write_streamed("\n");
                if (r.stop == StopReason::ContextFull) {
                    // From a script, an answer cut by the context is a failure, as in `run`.
                    if (!reader.interactive()) {
                        throw LimitError(concat("the context of ", engine.n_ctx(),
                                                " tokens is full (raise --ctx)"));
                    }
                    std::fprintf(stderr,
                                 "minfer: the context of %lld tokens is full; /clear starts over\n",
                                 static_cast<long long>(engine.n_ctx()));
                }
                if (o->stats) {
                    std::fprintf(stderr,
                                 "[prompt: %lld new tokens evaluated, %lld reused from the cache; "
                                 "answer: %lld tokens, "
                                 "%.1f tokens/s; stop: %s]\n",
                                 static_cast<long long>(r.stats.n_prompt),
                                 static_cast<long long>(session.last_reused_tokens()),
                                 static_cast<long long>(r.tokens.size()),
                                 r.stats.generation_tokens_per_second(), stop_reason_name(r.stop));
                }
                // Ctrl-C stops an answer on a terminal; a scripted conversation ends with it.
                if (r.stop == StopReason::Cancelled && !reader.interactive())
                    throw InterruptedByUser{};
            } catch (const LimitError& e) {
                // On a terminal, a conversation that no longer fits is said and the session
                // stays usable (/clear); from a script it fails the command.
                if (!reader.interactive()) throw;
                log_info(concat("minfer: ", e.what(), "; /clear starts over"));
            }
        }
    });
}

}  // namespace minfer::cli
