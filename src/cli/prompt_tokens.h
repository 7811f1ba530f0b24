#pragma once
// The input of commands that take either token ids (--tokens 1,2,3) or text (--prompt TEXT).

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/loaded_model.h"

namespace minfer::cli {

struct PromptFlags {
    std::string tokens;  // "1,2,3", "1 2 3" or "[1, 2, 3]"
    std::string prompt;  // text, tokenized with the model's vocabulary (BOS per the model)
    bool has_prompt = false;
    std::optional<std::vector<int32_t>> ids;  // --tokens parsed by check_prompt_flags
};

void add_prompt_flags(CLI::App* cmd, PromptFlags& flags);
// Before the model is loaded: one of the two is given, and the ids parse.
void check_prompt_flags(PromptFlags& flags);
// The tokens, with the ids checked against the model's vocabulary.
std::vector<int32_t> prompt_tokens(const LoadedModel& model, const PromptFlags& flags);

}  // namespace minfer::cli
