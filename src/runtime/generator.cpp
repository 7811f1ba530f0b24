#include "runtime/generator.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "tokenizer/streaming_decoder.h"

namespace minfer {

const char* stop_reason_name(StopReason reason) {
    switch (reason) {
        case StopReason::EndOfGeneration:
            return "eog";
        case StopReason::StopString:
            return "stop";
        case StopReason::MaxTokens:
            return "length";
        case StopReason::ContextFull:
            return "context";
        case StopReason::Interrupted:
            return "interrupted";
    }
    return "?";
}

std::string StopStringFilter::push(std::string_view text) {
    if (matched_) return "";
    held_ += text;
    // The earliest complete stop string wins.
    std::size_t first = std::string::npos;
    for (const auto& s : stops_) {
        if (s.empty()) continue;
        first = std::min(first, held_.find(s));
    }
    if (first != std::string::npos) {
        matched_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Keep the longest tail that is a proper prefix of some stop string.
    std::size_t keep = 0;
    for (const auto& s : stops_) {
        for (std::size_t n = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); n > keep;
             --n) {
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopStringFilter::flush() {
    std::string out;
    if (!matched_) out.swap(held_);
    held_.clear();
    return out;
}

GenerationResult generate(InferenceContext& ctx, const Tokenizer& tokenizer, Sampler& sampler,
                          std::span<const int32_t> prompt, const GenerationOptions& options,
                          const std::function<void(std::string_view)>& on_text,
                          const std::atomic<bool>* interrupt) {
    using Clock = std::chrono::steady_clock;
    const auto ms_since = [](Clock::time_point start) {
        return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    };
    if (prompt.empty() && ctx.n_past() == 0)
        throw UsageError("the prompt is empty: there is nothing to continue");
    if (ctx.n_past() + static_cast<int64_t>(prompt.size()) > ctx.n_ctx()) {
        throw LimitError(concat(
            "the prompt of ", prompt.size(), " tokens does not fit the context of ", ctx.n_ctx(),
            " tokens", ctx.n_past() > 0 ? concat(" (", ctx.n_past(), " already used)") : "",
            "; raise --ctx or shorten the prompt"));
    }

    GenerationResult result;
    for (int32_t t : prompt) sampler.accept(t);
    const auto prompt_start = Clock::now();
    std::vector<float> logits = ctx.evaluate_last(prompt);
    result.stats.n_prompt = static_cast<int64_t>(prompt.size());
    result.stats.prompt_ms = ms_since(prompt_start);

    StreamingDecoder decoder(tokenizer);
    StopStringFilter filter(options.stop);
    const auto emit = [&](const std::string& text) {
        if (text.empty()) return;
        result.text += text;
        if (on_text) on_text(text);
    };
    const auto generation_start = Clock::now();
    while (true) {
        if (options.n_predict >= 0 &&
            static_cast<int64_t>(result.tokens.size()) >= options.n_predict) {
            result.stop = StopReason::MaxTokens;
            break;
        }
        if (interrupt != nullptr && interrupt->load()) {
            result.stop = StopReason::Interrupted;
            break;
        }
        const int32_t token = sampler.sample(logits);
        ++result.stats.n_generated;
        if (tokenizer.is_eog(token)) {
            result.stop = StopReason::EndOfGeneration;
            break;
        }
        sampler.accept(token);
        result.tokens.push_back(token);
        emit(filter.push(decoder.feed(token)));
        if (filter.matched()) {
            result.stop = StopReason::StopString;
            break;
        }
        if (ctx.n_past() >= ctx.n_ctx()) {
            result.stop = StopReason::ContextFull;
            break;
        }
        const bool last = options.n_predict >= 0 &&
                          static_cast<int64_t>(result.tokens.size()) >= options.n_predict;
        if (last) {
            result.stop = StopReason::MaxTokens;
            break;
        }
        const int32_t one[1] = {token};
        logits = ctx.evaluate_last(one);
        result.evaluated.push_back(token);
    }
    if (!filter.matched()) emit(filter.push(decoder.finish()));
    emit(filter.flush());
    result.stats.generation_ms = ms_since(generation_start);
    return result;
}

}  // namespace minfer
