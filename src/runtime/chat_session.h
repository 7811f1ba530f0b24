#pragma once
// A multi-turn conversation on the engine. Each turn renders the whole conversation with the chat
// template, tokenizes it, and continues the previous turn's sequence: the KV cache positions it
// shares with the new prompt are kept, so a turn costs its new tokens, not the history.

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/loaded_model.h"

namespace minfer {

class ChatSession {
  public:
    ChatSession(Engine& engine, const LoadedModel& model, std::optional<std::string> system_prompt);
    ~ChatSession();
    ChatSession(const ChatSession&) = delete;
    ChatSession& operator=(const ChatSession&) = delete;

    // Adds the user's message and generates the assistant's reply (streamed to on_text) with
    // `params`' sampling, limits and stop strings (its prompt is the conversation). The reply joins
    // the conversation unless it was interrupted before any text. Throws LimitError when the
    // conversation no longer fits the context (the message is not added).
    SequenceResult reply(const std::string& user_text, SequenceParams params,
                         const std::function<void(std::string_view)>& on_text,
                         const std::atomic<bool>* interrupt = nullptr);
    // Forgets the conversation (keeps the system prompt).
    void clear();

    const nlohmann::ordered_json& messages() const { return messages_; }
    // Prompt tokens the last reply reused from the KV cache instead of evaluating them again.
    int64_t last_reused_tokens() const { return last_reused_; }

  private:
    Engine& engine_;
    const LoadedModel& model_;
    std::optional<std::string> system_;
    nlohmann::ordered_json messages_;
    std::optional<SeqId> kept_;  // the previous turn's sequence, whose cache the next continues
    int64_t last_reused_ = 0;
    uint64_t turns_ = 0;
};

}  // namespace minfer
