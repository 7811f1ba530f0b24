#pragma once
// Generation: feed a prompt into an inference context, then sample tokens one by one, streaming
// their text (never a broken UTF-8 sequence, never the start of a stop string) until an
// end-of-generation token, a stop string, the token limit, a full context, or an interrupt.

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/context.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace minfer {

enum class StopReason { EndOfGeneration, StopString, MaxTokens, ContextFull, Interrupted };
const char* stop_reason_name(
    StopReason reason);  // "eog", "stop", "length", "context", "interrupted"

struct GenerationOptions {
    int64_t n_predict = -1;         // tokens to generate at most; -1: until EOG or a full context
    std::vector<std::string> stop;  // generation ends before the first occurrence of any of these
};

struct GenerationStats {
    int64_t n_prompt = 0;  // prompt tokens evaluated
    double prompt_ms = 0;
    int64_t n_generated = 0;   // tokens sampled
    double generation_ms = 0;  // from the first sampled token to the end
    double prompt_tokens_per_second() const {
        return prompt_ms > 0 ? 1000.0 * n_prompt / prompt_ms : 0;
    }
    double generation_tokens_per_second() const {
        return generation_ms > 0 ? 1000.0 * n_generated / generation_ms : 0;
    }
};

struct GenerationResult {
    std::string text;             // everything streamed to on_text
    std::vector<int32_t> tokens;  // the generated tokens (without the end-of-generation token)
    std::vector<int32_t>
        evaluated;  // the generated tokens now in the KV cache (a prefix of tokens)
    StopReason stop = StopReason::MaxTokens;
    GenerationStats stats;
};

// Appends `prompt` to what `ctx` holds and generates. `sampler` sees the prompt and the generated
// tokens (penalties). Throws UsageError when the prompt does not fit the context.
GenerationResult generate(InferenceContext& ctx, const Tokenizer& tokenizer, Sampler& sampler,
                          std::span<const int32_t> prompt, const GenerationOptions& options,
                          const std::function<void(std::string_view text)>& on_text,
                          const std::atomic<bool>* interrupt = nullptr);

// Holds back streamed text that might be the beginning of a stop string.
class StopStringFilter {
  public:
    explicit StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    // Adds text; returns what can be shown now. Sets matched() when a stop string appeared (the
    // returned text then ends right before it).
    std::string push(std::string_view text);
    // What is still held back (at the end of generation, when no stop string matched).
    std::string flush();
    bool matched() const { return matched_; }

  private:
    std::vector<std::string> stops_;
    std::string held_;
    bool matched_ = false;
};

}  // namespace minfer
