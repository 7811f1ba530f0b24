#include "runtime/prompt.h"

#include "core/error.h"

namespace minfer {

std::string render_chat_prompt(const LoadedModel& m, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools,
                               const nlohmann::ordered_json& extra_context) {
    chat::ChatInputs in;
    in.messages = messages;
    in.tools = tools;
    if (extra_context.is_object()) in.extra_context = extra_context;
    in.add_generation_prompt = true;
    in.bos_token = m.bos_text;
    in.eos_token = m.eos_text;
    return m.chat_template.render(in);
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
