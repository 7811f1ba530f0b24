#pragma once
// The bodies of ollama's POST /api/chat and /api/generate, parsed, checked and translated into a
// GenerationRequest:
//   messages (role, content, tool_calls with arguments as objects, tool_name) -> the same
//     conversation as OpenAI writes it; images are refused (400: minfer serves text models)
//   /api/generate: prompt and system -> a conversation through the template; raw -> the prompt
//     as is; suffix refused (no fill-in-the-middle)
//   options {temperature, top_k, top_p, min_p, typical_p, seed, num_predict, stop,
//     repeat_penalty, repeat_last_n, presence_penalty, frequency_penalty} -> sampling;
//     num_ctx, num_keep, num_batch, num_thread, num_gpu, main_gpu, use_mmap, ... (the server's
//     settings) accepted and ignored, as ollama ignores options it does not know
//   format "json" or a JSON schema -> the answer's grammar; tools -> OpenAI's function tools;
//   think (true, false, "high", "medium", "low") -> the template's enable_thinking
//   stream: true by default (NDJSON), keep_alive accepted (one model, always loaded)

#include <string_view>

#include "server/generation_request.h"

namespace minfer::server {

// Throws ApiError (400) naming the field at fault.
GenerationRequest parse_ollama_chat(std::string_view body, const SamplingParams& defaults);
// `raw` generate requests have a PromptInput, others a ChatInput. An empty prompt (ollama's way
// to load a model) is a ChatInput without messages.
GenerationRequest parse_ollama_generate(std::string_view body, const SamplingParams& defaults);

}  // namespace minfer::server
