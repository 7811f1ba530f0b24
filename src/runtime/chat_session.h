#pragma once
// A multi-turn conversation over one inference context. Each turn renders the whole conversation
// with the chat template, tokenizes it, and evaluates only the tokens after the longest prefix the
// KV cache already holds, so a turn costs its new tokens, not the history.

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "model/context.h"
#include "runtime/generator.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

class ChatSession {
  public:
    ChatSession(InferenceContext& ctx, const Tokenizer& tokenizer, chat::ChatTemplate chat_template,
                const GgufMetadata& metadata, std::optional<std::string> system_prompt);

    // Adds the user's message and generates the assistant's reply (streamed to on_text). The reply
    // joins the conversation unless it was interrupted before any text.
    GenerationResult reply(const std::string& user_text, Sampler& sampler,
                           const GenerationOptions& options,
                           const std::function<void(std::string_view)>& on_text,
                           const std::atomic<bool>* interrupt = nullptr);
    // Forgets the conversation (keeps the system prompt).
    void clear();

    const nlohmann::ordered_json& messages() const { return messages_; }
    // Tokens the last reply reused from the KV cache instead of evaluating them again.
    int64_t last_reused_tokens() const { return last_reused_; }

    // The prompt tokens of the conversation so far plus a generation prompt (tokenized as
    // llama.cpp does: the template's own leading BOS text is dropped, the model's BOS is added).
    std::vector<int32_t> render_tokens() const;

  private:
    InferenceContext& ctx_;
    const Tokenizer& tokenizer_;
    chat::ChatTemplate template_;
    std::string bos_text_, eos_text_;
    std::optional<std::string> system_;
    nlohmann::ordered_json messages_;
    std::vector<int32_t> cached_;  // the tokens the KV cache holds, position by position
    int64_t last_reused_ = 0;
};

// Renders messages with the template and tokenizes the prompt as llama.cpp does (shared by run
// and chat): a leading BOS text is removed from the rendered text when the model adds BOS itself.
std::vector<int32_t> tokenize_chat_prompt(const Tokenizer& tokenizer, const std::string& rendered,
                                          const std::string& bos_text);

}  // namespace minfer
