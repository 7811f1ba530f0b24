#include "runtime/chat_session.h"

#include <algorithm>

#include "core/error.h"

namespace minfer {

std::vector<int32_t> tokenize_chat_prompt(const Tokenizer& tokenizer, const std::string& rendered,
                                          const std::string& bos_text) {
    std::string_view text = rendered;
    // Templates that write {{ bos_token }} would get a second BOS from the tokenizer.
    if (tokenizer.add_bos() && !bos_text.empty() && text.substr(0, bos_text.size()) == bos_text) {
        text.remove_prefix(bos_text.size());
    }
    return tokenizer.tokenize(text, /*add_special=*/true, /*parse_special=*/true);
}

ChatSession::ChatSession(InferenceContext& ctx, const Tokenizer& tokenizer,
                         chat::ChatTemplate chat_template, const GgufMetadata& metadata,
                         std::optional<std::string> system_prompt)
    : ctx_(ctx),
      tokenizer_(tokenizer),
      template_(std::move(chat_template)),
      bos_text_(chat::special_token_text(metadata, "tokenizer.ggml.bos_token_id")),
      eos_text_(chat::special_token_text(metadata, "tokenizer.ggml.eos_token_id")),
      system_(std::move(system_prompt)) {
    clear();
}

void ChatSession::clear() {
    messages_ = nlohmann::ordered_json::array();
    if (system_) messages_.push_back({{"role", "system"}, {"content", *system_}});
}

std::vector<int32_t> ChatSession::render_tokens() const {
    chat::ChatInputs in;
    in.messages = messages_;
    in.add_generation_prompt = true;
    in.bos_token = bos_text_;
    in.eos_token = eos_text_;
    return tokenize_chat_prompt(tokenizer_, template_.render(in), bos_text_);
}

GenerationResult ChatSession::reply(const std::string& user_text, Sampler& sampler,
                                    const GenerationOptions& options,
                                    const std::function<void(std::string_view)>& on_text,
                                    const std::atomic<bool>* interrupt) {
    messages_.push_back({{"role", "user"}, {"content", user_text}});
    std::vector<int32_t> tokens;
    try {
        tokens = render_tokens();
    } catch (...) {
        messages_.erase(messages_.size() - 1);
        throw;
    }
    // Reuse the longest common prefix of what the cache holds (at least one token must be
    // evaluated to get logits).
    std::size_t common = 0;
    while (common < cached_.size() && common < tokens.size() && cached_[common] == tokens[common])
        ++common;
    if (common == tokens.size()) --common;
    if (static_cast<int64_t>(tokens.size()) > ctx_.n_ctx()) {
        messages_.erase(messages_.size() - 1);
        throw LimitError(concat("the conversation (", tokens.size(),
                                " tokens) no longer fits the context of ", ctx_.n_ctx(),
                                " tokens (raise --ctx)"));
    }
    ctx_.truncate(std::min<int64_t>(static_cast<int64_t>(common), ctx_.n_past()));
    cached_.resize(static_cast<std::size_t>(ctx_.n_past()));
    last_reused_ = ctx_.n_past();

    sampler.clear_history();
    const std::span<const int32_t> fresh = std::span(tokens).subspan(cached_.size());
    GenerationResult result =
        generate(ctx_, tokenizer_, sampler, fresh, options, on_text, interrupt);
    cached_.insert(cached_.end(), fresh.begin(), fresh.end());
    cached_.insert(cached_.end(), result.evaluated.begin(), result.evaluated.end());
    if (result.stop == StopReason::Interrupted && result.text.empty()) {
        messages_.erase(messages_.size() - 1);
    } else {
        messages_.push_back({{"role", "assistant"}, {"content", result.text}});
    }
    return result;
}

}  // namespace minfer
