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

#include "server/generation_request.h"

namespace minfer::server {

// Throw ApiError (400) for a body that is not a JSON object or holds a bad field.
// with_constraint false: response_format and grammar are not read (/apply-template).
// The request's input is a ChatInput.
GenerationRequest parse_chat_request(std::string_view body, const SamplingParams& defaults,
                                     bool with_constraint = true);
// The request's input is a PromptInput.
GenerationRequest parse_completion_request(std::string_view body, const SamplingParams& defaults);

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

}  // namespace minfer::server
