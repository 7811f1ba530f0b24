#include "runtime/prompt.h"

#include <algorithm>
#include <ctime>

#include "chat/tool_calls.h"
#include "core/error.h"
#include "runtime/tool_calling.h"

namespace minfer {

std::string render_chat_prompt(const LoadedModel& m, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools,
                               const nlohmann::ordered_json& extra_context) {
    using Json = nlohmann::ordered_json;
    const chat::ToolCallFormat format = chat::detect_tool_call_format(m.chat_template.source());
    chat::ChatInputs in;
    in.tools = tools;
    if (extra_context.is_object()) in.extra_context = extra_context;
    // What firefunction's template reads instead of `tools`.
    if (tools.is_array() && !in.extra_context.contains("functions")) {
        if (!in.extra_context.is_object()) in.extra_context = Json::object();
        in.extra_context["functions"] = tools.dump(2);
        const std::time_t now = std::time(nullptr);
        char date[64];
        std::tm utc{};
        gmtime_r(&now, &utc);
        std::strftime(date, sizeof date, "%b %d %Y %H:%M:%S GMT", &utc);
        in.extra_context["datetime"] = date;
    }
    in.add_generation_prompt = true;
    in.bos_token = m.bos_text;
    in.eos_token = m.eos_text;
    // Earlier calls' arguments as objects, which most templates tojson; some (functionary,
    // DeepSeek) concatenate strings instead: those get the strings.
    in.messages = messages_for_template(format, messages, tools, /*arguments_as_text=*/false);
    try {
        return m.chat_template.render(in);
    } catch (const Error&) {
        const bool has_calls = std::any_of(messages.begin(), messages.end(), [](const Json& x) {
            return x.is_object() && x.contains("tool_calls");
        });
        if (!has_calls) throw;
        in.messages = messages_for_template(format, messages, tools, /*arguments_as_text=*/true);
        return m.chat_template.render(in);
    }
}

std::vector<int32_t> tokenize_chat_prompt(const LoadedModel& m, std::string_view text) {
    // Templates that write {{ bos_token }} would get a second BOS from the tokenizer.
    if (m.tokenizer->add_bos() && !m.bos_text.empty() &&
        text.substr(0, m.bos_text.size()) == m.bos_text)
        text.remove_prefix(m.bos_text.size());
    return m.tokenizer->tokenize(text, /*add_special=*/true, /*parse_special=*/true);
}

std::vector<int32_t> chat_prompt_tokens(const LoadedModel& m,
                                        const nlohmann::ordered_json& messages) {
    return tokenize_chat_prompt(m, render_chat_prompt(m, messages));
}

std::vector<int32_t> single_prompt_tokens(const LoadedModel& m, const std::string& text, bool raw,
                                          const std::optional<std::string>& system) {
    if (raw || !m.has_template) {
        std::vector<int32_t> tokens =
            m.tokenizer->tokenize(text, /*add_special=*/true, /*parse_special=*/true);
        if (tokens.empty())
            throw UsageError(
                "the prompt is empty and the model adds no BOS token: nothing to continue");
        return tokens;
    }
    auto messages = nlohmann::ordered_json::array();
    if (system) messages.push_back({{"role", "system"}, {"content", *system}});
    messages.push_back({{"role", "user"}, {"content", text}});
    return chat_prompt_tokens(m, messages);
}

}  // namespace minfer
