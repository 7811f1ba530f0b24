// The `minfer` command: subcommands registered from src/cli/cmd_*.cpp; every error becomes one
// line on stderr and a non-zero exit code.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/log.h"

namespace {

void print_to_stderr(minfer::LogLevel level, std::string_view message) {
    const char* prefix = level == minfer::LogLevel::Warning ? "minfer: warning: " : "";
    std::fprintf(stderr, "%s%.*s\n", prefix, static_cast<int>(message.size()), message.data());
}

}  // namespace

int main(int argc, char** argv) {
    minfer::set_log_sink(print_to_stderr);

    CLI::App app{"minfer: run large language models from GGUF files"};
    app.name("minfer");
    app.set_version_flag("--version", std::string("minfer ") + MINFER_VERSION);
    app.require_subcommand(0, 1);
    app.fallthrough(false);
    // One line per error: "minfer: error: <what>; see minfer COMMAND --help".
    app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
        // Point at the help of the subcommand being parsed, if any.
        std::string hint = "minfer --help";
        for (const CLI::App* sub : failed->get_subcommands())
            hint = "minfer " + sub->get_name() + " --help";
        return std::string("minfer: error: ") + e.what() + " (see " + hint + ")\n";
    });

    minfer::cli::add_info_command(app);
    minfer::cli::add_run_command(app);
    minfer::cli::add_chat_command(app);
    minfer::cli::add_score_command(app);
    minfer::cli::add_bench_command(app);
    minfer::cli::add_template_command(app);
    minfer::cli::add_quantize_command(app);
    minfer::cli::add_tokenize_command(app);
    minfer::cli::add_detokenize_command(app);

    std::string help_topic;
    CLI::App* help = app.add_subcommand("help", "Show help for a command: minfer help COMMAND");
    help->add_option("command", help_topic, "The command to explain");
    help->callback([&] {
        if (help_topic.empty()) {
            std::cout << app.help();
            return;
        }
        CLI::App* sub = nullptr;
        try {
            sub = app.get_subcommand(help_topic);
        } catch (const CLI::OptionNotFound&) {
        }
        if (sub == nullptr)
            throw minfer::UsageError("unknown command '" + help_topic + "'; see minfer --help");
        std::cout << sub->help();
    });

    try {
        app.parse(argc, argv);
        if (app.get_subcommands().empty()) {
            std::cout << app.help();
            return 0;
        }
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    } catch (const minfer::Error& e) {
        std::fprintf(stderr, "minfer: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "minfer: internal error: %s\n", e.what());
        return 2;
    }
    return 0;
}
