#include "runtime/chat_session.h"

#include "core/error.h"
#include "runtime/generation.h"
#include "runtime/prompt.h"

namespace minfer {

ChatSession::ChatSession(Engine& engine, const LoadedModel& model,
                         std::optional<std::string> system_prompt)
    : engine_(engine), model_(model), system_(std::move(system_prompt)) {
    clear();
}

ChatSession::~ChatSession() {
    try {
        if (kept_) engine_.release(*kept_);
    } catch (const Error&) {
        // The engine no longer knows it (a reply that failed midway): nothing to free.
    }
}

void ChatSession::clear() {
    messages_ = nlohmann::ordered_json::array();
    if (system_) messages_.push_back({{"role", "system"}, {"content", *system_}});
}

SequenceResult ChatSession::reply(const std::string& user_text, SequenceParams params,
                                  const std::function<void(std::string_view)>& on_text,
                                  const std::atomic<bool>* interrupt) {
    messages_.push_back({{"role", "user"}, {"content", user_text}});
    try {
        params.prompt = chat_prompt_tokens(model_, messages_);
        if (static_cast<int64_t>(params.prompt.size()) > engine_.n_ctx()) {
            throw LimitError(concat("the conversation (", params.prompt.size(),
                                    " tokens) no longer fits the context of ", engine_.n_ctx(),
                                    " tokens (raise --ctx)"));
        }
    } catch (...) {
        messages_.erase(messages_.size() - 1);
        throw;
    }
    // Each turn draws its own random numbers: the same seed would repeat the last turn's draws.
    params.sampling.seed += turns_++;
    params.keep = true;
    params.continue_from = kept_;
    kept_.reset();  // submit takes its cache over
    const Generation g = generate(engine_, std::move(params), on_text, interrupt);
    kept_ = g.id;
    last_reused_ = g.result.stats.n_reused;
    if (g.result.stop == StopReason::Cancelled && g.result.text.empty()) {
        messages_.erase(messages_.size() - 1);
    } else {
        messages_.push_back({{"role", "assistant"}, {"content", g.result.text}});
    }
    return g.result;
}

}  // namespace minfer
