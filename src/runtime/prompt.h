#pragma once
// Turning what a user typed into prompt tokens, as llama.cpp does (shared by run, chat and the
// server): through the chat template, or raw.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/loaded_model.h"

namespace minfer {

// Renders `messages` with the model's template (generation prompt added) and tokenizes the result
// as llama.cpp does: a leading BOS text is removed when the tokenizer adds BOS itself, and
// special-token text is parsed.
std::vector<int32_t> chat_prompt_tokens(const LoadedModel& m,
                                        const nlohmann::ordered_json& messages);

// The same in two steps, with tools and more template variables (the server's
// chat_template_kwargs): the rendered text, then its tokens.
std::string render_chat_prompt(const LoadedModel& m, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools = nullptr,
                               const nlohmann::ordered_json& extra_context = nullptr);
std::vector<int32_t> tokenize_chat_prompt(const LoadedModel& m, std::string_view rendered);

// The prompt of `run`: the text as is (raw, or a model without a chat template: BOS per the
// model, special-token text parsed), or as one user message after an optional system message.
// Throws UsageError when a raw prompt comes out empty (an empty text and no BOS).
std::vector<int32_t> single_prompt_tokens(const LoadedModel& m, const std::string& text, bool raw,
                                          const std::optional<std::string>& system);

}  // namespace minfer
