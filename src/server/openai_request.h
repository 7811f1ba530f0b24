#pragma once
// The bodies of POST /v1/chat/completions and /v1/completions, parsed and checked before any work
// starts: every field of the wrong type or out of range is an ApiError 400 naming it; fields we do
// not know are ignored; fields a request leaves out take the server's defaults (the sampling
// flags of `minfer serve`, as llama-server does).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "runtime/tool_calling.h"
#include "sampling/sampler.h"

namespace minfer::server {

// What both endpoints share.
struct GenerationRequest {
    std::string model;  // echoed in the response
    SamplingParams sampling;
    bool seed_given = false;  // else each choice draws a random seed
    int64_t max_tokens = -1;  // -1: until end of generation or a full context
    std::vector<std::string> stop;
    int n = 1;  // choices, 1 to 8
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    bool ignore_eos = false;
    int logprobs = -1;  // -1: none; else how many alternatives per token (0 to 20, 5 legacy)
    // The answer's form, from response_format (json_object, json_schema) or llama-server's
    // `grammar`, parsed and converted already; `constraint_field` names the field for errors.
    std::optional<grammar::Grammar> constraint;
    std::string constraint_field;
};

struct ChatRequest {
    GenerationRequest gen;
    nlohmann::ordered_json messages;  // content flattened to strings; other fields as sent
    nlohmann::ordered_json tools;     // null when absent; else checked function tools
    ToolChoice tool_choice;           // Auto by default (None when there are no tools)
    bool parallel_tool_calls = true;
    nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();  // + tool_choice
};

struct TextCompletionRequest {
    GenerationRequest gen;
    std::optional<std::string> prompt_text;  // or
    std::vector<int32_t> prompt_tokens;      // ids (checked against the vocabulary later)
};

inline constexpr int kMaxChoices = 8;
inline constexpr int kMaxTopLogprobs = 20;
inline constexpr int kMaxLegacyLogprobs = 5;

// Throw ApiError (400) for a body that is not a JSON object or holds a bad field.
// with_constraint false: response_format and grammar are not read (/apply-template).
ChatRequest parse_chat_request(std::string_view body, const SamplingParams& defaults,
                               bool with_constraint = true);
TextCompletionRequest parse_completion_request(std::string_view body,
                                               const SamplingParams& defaults);

// POST /tokenize and /detokenize, in llama-server's shapes.
struct TokenizeRequest {
    std::string content;
    bool add_special = false;
    bool parse_special = true;
    bool with_pieces = false;
};
TokenizeRequest parse_tokenize_request(std::string_view body);
// The ids of {"tokens": [...]}, each below n_vocab.
std::vector<int32_t> parse_detokenize_request(std::string_view body, int64_t n_vocab);

// The JSON object of a body (400 for malformed JSON or another value).
nlohmann::ordered_json parse_json_object(std::string_view body);

}  // namespace minfer::server
