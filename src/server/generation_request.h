#pragma once
// One request for generated text, whatever API it came through (OpenAI's chat and text
// completions, Anthropic's messages): each front end parses its body into this, and one path
// (server/generation_path.h) turns it into the engine's work.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "grammar/grammar.h"
#include "runtime/tool_calling.h"
#include "sampling/sampler.h"

namespace minfer::server {

// A conversation, rendered through the model's chat template. The messages are in OpenAI's form
// (content flattened to strings; tool calls and tool results as OpenAI writes them), whatever the
// API: the front ends translate theirs.
struct ChatInput {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;  // null when absent; else function tools, checked
    ToolChoice tool_choice;        // Auto by default (None when there are no tools)
    bool parallel_tool_calls = true;
    // More template variables (chat_template_kwargs; tool_choice, enable_thinking).
    nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
    // The start of the answer, written after the generation prompt and continued (Anthropic's
    // last assistant message); not repeated in the response.
    std::string prefill;
};

// A raw prompt: text (tokenized with BOS and special tokens parsed) or token ids (checked against
// the vocabulary by the path).
struct PromptInput {
    std::optional<std::string> text;
    std::vector<int32_t> tokens;
};

struct GenerationRequest {
    std::string model;  // as the client named it; echoed in the response
    // ollama's keep_alive (server/keep_alive.h): how long the model stays loaded after this
    // request; nullopt: as the model's last request said, else --keep-alive.
    std::optional<std::chrono::milliseconds> keep_alive;
    std::variant<ChatInput, PromptInput> input;
    SamplingParams sampling;
    bool seed_given = false;  // else each choice draws a random seed
    int64_t max_tokens = -1;  // -1: the server's default (--n-predict), else until EOG or n_ctx
    std::vector<std::string> stop;
    int n = 1;  // choices, 1 to 8
    bool stream = false;
    bool include_usage = false;  // OpenAI's stream_options.include_usage
    bool ignore_eos = false;
    int logprobs = -1;  // -1: none; else how many alternatives per token (0 to 20, 5 legacy)
    // The answer's form (response_format, llama-server's `grammar`), parsed and converted
    // already; `constraint_field` names the field for errors. Tools add theirs on the path.
    std::optional<grammar::Grammar> constraint;
    std::string constraint_field;

    bool is_chat() const { return std::holds_alternative<ChatInput>(input); }
    const ChatInput& chat() const { return std::get<ChatInput>(input); }
};

inline constexpr int kMaxChoices = 8;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxLegacyLogprobs = 5;
inline constexpr std::size_t kMaxStops = 16;
inline constexpr std::size_t kMaxStopBytes = 1024;

}  // namespace minfer::server
