#include "server/reasoning_split.h"

namespace minfer::server {
namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
std::size_t partial_tag_at_end(std::string_view text, std::string_view tag) {
    for (std::size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
        if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
    }
    return 0;
}

}  // namespace

ReasoningSplitter::ReasoningSplitter(bool enabled, bool in_reasoning)
    : enabled_(enabled),
      state_(!enabled       ? State::Content
             : in_reasoning ? State::Reasoning
                            : State::Start) {}

void ReasoningSplitter::route(std::string_view text, SplitText& out) const {
    (state_ == State::Reasoning ? out.reasoning : out.content) += text;
}

SplitText ReasoningSplitter::push(std::string_view text) {
    SplitText out;
    if (!enabled_) {
        out.content = text;
        return out;
    }
    held_ += text;
    while (!held_.empty()) {
        if (state_ == State::Start) {
            // Leading whitespace, then either <think> or the answer itself.
            std::size_t i = 0;
            while (i < held_.size() && is_space(held_[i])) ++i;
            const std::string_view rest = std::string_view(held_).substr(i);
            if (rest.size() < kOpen.size() && kOpen.substr(0, rest.size()) == rest) break;  // wait
            if (rest.substr(0, kOpen.size()) == kOpen) {
                held_.erase(0, i + kOpen.size());
                state_ = State::Reasoning;
            } else {
                state_ = State::Content;
            }
            continue;
        }
        if (state_ == State::AfterReasoning) {
            // The newlines the template writes after </think> belong to neither part.
            std::size_t i = 0;
            while (i < held_.size() && is_space(held_[i])) ++i;
            held_.erase(0, i);
            if (!held_.empty()) state_ = State::Content;
            continue;
        }
        if (state_ == State::Content) {
            out.content += held_;
            held_.clear();
            break;
        }
        // Reasoning: up to </think>, then the answer.
        const std::size_t close = held_.find(kClose);
        if (close == std::string::npos) {
            const std::size_t keep = partial_tag_at_end(held_, kClose);
            out.reasoning += held_.substr(0, held_.size() - keep);
            held_.erase(0, held_.size() - keep);
            break;
        }
        out.reasoning += held_.substr(0, close);
        held_.erase(0, close + kClose.size());
        state_ = State::AfterReasoning;
    }
    return out;
}

SplitText ReasoningSplitter::finish() {
    SplitText out;
    if (state_ == State::Start) state_ = State::Content;
    if (state_ != State::AfterReasoning) route(held_, out);
    held_.clear();
    return out;
}

bool template_writes_reasoning(std::string_view template_source) {
    return template_source.find(kClose) != std::string_view::npos;
}

bool prompt_opens_reasoning(std::string_view prompt) {
    while (!prompt.empty() && is_space(prompt.back())) prompt.remove_suffix(1);
    return prompt.size() >= kOpen.size() && prompt.substr(prompt.size() - kOpen.size()) == kOpen;
}

}  // namespace minfer::server
