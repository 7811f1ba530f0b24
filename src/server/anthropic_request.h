#pragma once
// The body of Anthropic's POST /v1/messages (and /v1/messages/count_tokens), parsed, checked and
// translated into a GenerationRequest whose conversation is in the form the chat templates take:
//   system (a string or text blocks)        -> a "system" message
//   user text blocks                        -> a "user" message (blocks joined by newlines)
//   user tool_result blocks                 -> "tool" messages (tool_call_id = tool_use_id)
//   assistant text and tool_use blocks      -> an "assistant" message with tool_calls
//   assistant thinking blocks               -> dropped (templates drop earlier reasoning)
//   a last assistant message                -> the start of the answer (prefill): rendered
//                                              after the generation prompt, continued
//   tools [{name, description, input_schema}] and tool_choice {auto, any, tool, none}
//   thinking {type: enabled | disabled}     -> the template's enable_thinking
// Images, documents and server tools are refused (400): minfer serves text models.

#include <string_view>

#include "server/generation_request.h"

namespace minfer::server {

// Throws ApiError (400) naming the field at fault. `count_only`: /v1/messages/count_tokens, where
// max_tokens is not required.
// The request's input is a ChatInput.
GenerationRequest parse_messages_request(std::string_view body, const SamplingParams& defaults,
                                         bool count_only = false);

}  // namespace minfer::server
