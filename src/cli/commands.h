#pragma once
// Each `minfer` subcommand registers itself on the CLI11 app through one of these functions;
// its callback does the work and throws minfer::Error on failure (main prints it as one line).

#include <CLI/CLI.hpp>

namespace minfer::cli {

void add_info_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_chat_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_template_command(CLI::App& app);
void add_quantize_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_detokenize_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_bench_serve_command(CLI::App& app);
void add_pull_command(CLI::App& app);
void add_list_command(CLI::App& app);
// minfer --list-devices: the devices --device accepts (list_devices.cpp).
void print_devices();
void add_rm_command(CLI::App& app);

}  // namespace minfer::cli
