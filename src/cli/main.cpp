// The `minfer` command: subcommands registered from src/cli/cmd_*.cpp; every error becomes one
// line on stderr and a non-zero exit code.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/standard_output.h"
#include "core/error.h"
#include "core/log.h"
#include "core/terminal_text.h"

namespace {

namespace cli = minfer::cli;

// Messages quote file names, metadata and user text: control characters and invalid UTF-8 are
// escaped so that one error stays one line and nothing reaches the terminal as a command.
std::string terminal_safe(std::string_view text) {
    return minfer::escape_for_terminal(text);
}

void print_to_stderr(minfer::LogLevel level, std::string_view message) {
    const char* prefix = level == minfer::LogLevel::Warning ? "minfer: warning: " : "";
    std::fprintf(stderr, "%s%s\n", prefix, terminal_safe(message).c_str());
}

void print_error(std::string_view message) {
    std::fprintf(stderr, "minfer: error: %s\n", terminal_safe(message).c_str());
}

// A command that ends other than by returning (Ctrl-C, --help) still printed something: a failed
// write outranks its status.
int report_output_errors_then(int status) {
    try {
        cli::finish_standard_output();
    } catch (const minfer::Error& e) {
        print_error(e.what());
        return cli::kExitRuntimeError;
    }
    return status;
}

// llama.cpp spells some options with several letters after one dash ("-np 4"), which CLI11
// cannot declare: they are rewritten to their long names before parsing.
std::vector<std::string> arguments_with_long_names(int argc, char** argv) {
    static constexpr std::pair<std::string_view, std::string_view> kSpellings[] = {
        {"-np", "--n-parallel"},
        {"-ngl", "--gpu-layers"},
    };
    std::vector<std::string> args;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        for (const auto& [short_name, long_name] : kSpellings) {
            if (a == short_name)
                a = long_name;
            else if (a.rfind(std::string(short_name) + "=", 0) == 0)
                a = std::string(long_name) + a.substr(short_name.size());
        }
        args.push_back(std::move(a));
    }
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments in reverse order
    return args;
}

}  // namespace

int main(int argc, char** argv) {
    minfer::set_log_sink(print_to_stderr);

    CLI::App app{"minfer: run large language models from GGUF files"};
    app.name("minfer");
    app.set_version_flag("--version", std::string("minfer ") + MINFER_VERSION);
    app.require_subcommand(0, 1);
    // Printed as soon as it is parsed, like --version: nothing after it runs.
    app.add_flag_callback(
           "--list-devices",
           [] {
               minfer::cli::print_devices();
               cli::finish_standard_output();
               throw CLI::Success();
           },
           "List the devices --device accepts (CPU, reference, Vulkan GPUs) and exit")
        ->trigger_on_parse();
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
    minfer::cli::add_serve_command(app);
    minfer::cli::add_bench_serve_command(app);
    minfer::cli::add_template_command(app);
    minfer::cli::add_quantize_command(app);
    minfer::cli::add_tokenize_command(app);
    minfer::cli::add_detokenize_command(app);
    minfer::cli::add_pull_command(app);
    minfer::cli::add_list_command(app);
    minfer::cli::add_rm_command(app);

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
        std::vector<std::string> args = arguments_with_long_names(argc, argv);
        app.parse(args);
        if (app.get_subcommands().empty()) std::cout << app.help();
        cli::finish_standard_output();
        return cli::kExitSuccess;
    } catch (const CLI::CallForHelp& e) {
        // --help, --version: status 0, unless the text could not be written.
        return report_output_errors_then(app.exit(e));
    } catch (const CLI::CallForAllHelp& e) {
        return report_output_errors_then(app.exit(e));
    } catch (const CLI::CallForVersion& e) {
        return report_output_errors_then(app.exit(e));
    } catch (const CLI::Success&) {
        return cli::kExitSuccess;  // --list-devices, written and flushed (after the help and
                                   // version catches: those derive from Success)
    } catch (const CLI::ParseError& e) {
        // CLI11 has its own codes (104-114) per kind of mistake; scripts need one.
        app.exit(e);
        return cli::kExitUsageError;
    } catch (const cli::InterruptedByUser&) {
        return report_output_errors_then(cli::kExitInterrupted);
    } catch (const minfer::Cancelled& e) {
        // Ctrl-C during a download: what is kept and how to resume.
        print_error(e.what());
        return report_output_errors_then(cli::kExitInterrupted);
    } catch (const minfer::UsageError& e) {
        print_error(e.what());
        return cli::kExitUsageError;
    } catch (const minfer::Error& e) {
        print_error(e.what());
        return cli::kExitRuntimeError;
    } catch (const std::bad_alloc&) {
        print_error("out of memory");
        return cli::kExitRuntimeError;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "minfer: internal error: %s\n", terminal_safe(e.what()).c_str());
        return cli::kExitRuntimeError;
    }
}
