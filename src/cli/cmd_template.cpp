// `minfer template MODEL ...`: prints the prompt a model's chat template makes of a
// conversation, exactly as rendered (no newline is added), for debugging prompts.

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>

#include "chat/chat_template.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/file_io.h"
#include "gguf/gguf_file.h"

namespace minfer::cli {
namespace {

struct TemplateOptions {
    std::string model;
    std::string messages_file;
    std::string user, system;
    std::string tools_file;
    bool no_generation_prompt = false;
    std::string template_file;
    std::string now;
};

nlohmann::ordered_json read_json_file(const std::string& path, const char* what) {
    const std::string text = read_file(path, concat("the ", what, " file"));
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw FormatError(concat(what, " file '", path, "' is not valid JSON: ", e.what()));
    }
}

// "2024-07-26T10:30:00" (or with a space, or just a date) as a UTC time point.
std::chrono::system_clock::time_point parse_now(const std::string& text) {
    for (const char* format : {"%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d"}) {
        std::tm tm{};
        std::istringstream in(text);
        in >> std::get_time(&tm, format);
        if (!in.fail() && in.peek() == std::char_traits<char>::eof())
            return std::chrono::system_clock::from_time_t(timegm(&tm));
    }
    throw UsageError(concat("--now '", text, "' is not a time like 2024-07-26T10:30:00"));
}

void run(const TemplateOptions& o) {
    chat::ChatInputs in;
    if (!o.messages_file.empty()) {
        in.messages = read_json_file(o.messages_file, "messages");
        if (!in.messages.is_array())
            throw UsageError(
                concat("--messages file '", o.messages_file, "' must hold a JSON list"));
    } else {
        if (!o.system.empty()) in.messages.push_back({{"role", "system"}, {"content", o.system}});
        in.messages.push_back({{"role", "user"}, {"content", o.user}});
    }
    if (!o.tools_file.empty()) {
        in.tools = read_json_file(o.tools_file, "tools");
        if (!in.tools.is_array())
            throw UsageError(concat("--tools file '", o.tools_file, "' must hold a JSON list"));
    }
    in.add_generation_prompt = !o.no_generation_prompt;
    if (!o.now.empty()) in.now = parse_now(o.now);

    const GgufFile file = GgufFile::open(resolve_model_for_cli(o.model));
    const auto& meta = file.metadata();
    std::optional<std::filesystem::path> override_file;
    if (!o.template_file.empty()) override_file = o.template_file;
    const auto tmpl = chat::ChatTemplate::parse(chat::template_source_for(meta, override_file));
    in.bos_token = chat::special_token_text(meta, "tokenizer.ggml.bos_token_id");
    in.eos_token = chat::special_token_text(meta, "tokenizer.ggml.eos_token_id");
    const std::string prompt = tmpl.render(in);
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
    std::fflush(stdout);
}

}  // namespace

void add_template_command(CLI::App& app) {
    auto options = std::make_shared<TemplateOptions>();
    CLI::App* cmd = app.add_subcommand("template",
                                       "Print the prompt a model's chat template makes of a "
                                       "conversation (exactly, no newline added)");
    cmd->add_option("model", options->model, kModelHelp)->required();
    auto* messages = cmd->add_option("--messages", options->messages_file,
                                     "JSON file: a list of OpenAI-style messages");
    auto* user =
        cmd->add_option("--user", options->user, "The user's message (instead of --messages)");
    cmd->add_option("--system", options->system, "A system message before --user")->needs(user);
    messages->excludes(user);
    cmd->add_option("--tools", options->tools_file,
                    "JSON file: a list of tool (function) definitions");
    cmd->add_flag("--no-generation-prompt", options->no_generation_prompt,
                  "Do not open the assistant's turn at the end");
    cmd->add_option("--template", options->template_file,
                    "Jinja file replacing the model's chat template");
    cmd->add_option("--now", options->now,
                    "Fix the clock strftime_now reads, e.g. 2024-07-26T10:30:00");
    cmd->callback([options, messages, user] {
        if (messages->count() == 0 && user->count() == 0)
            throw UsageError("give --messages FILE or --user TEXT");
        run(*options);
    });
}

}  // namespace minfer::cli
