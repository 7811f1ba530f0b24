#include "cli/prompt_tokens.h"

#include "cli/context_flags.h"
#include "core/error.h"

namespace minfer::cli {

void add_prompt_flags(CLI::App* cmd, PromptFlags& f) {
    auto* tokens = cmd->add_option("--tokens", f.tokens, "Token ids, comma-separated: 1,2,3");
    auto* prompt = cmd->add_option("-p,--prompt", f.prompt, "Text, tokenized with the model's vocabulary");
    tokens->excludes(prompt);
    prompt->each([&f](const std::string&) { f.has_prompt = true; });
}

std::vector<int32_t> prompt_tokens(const Model&, const PromptFlags& f) {
    if (f.has_prompt) throw UnsupportedError("--prompt needs the tokenizer, which this build does not have yet");
    if (f.tokens.empty()) throw UsageError("give the input as --tokens 1,2,3 or --prompt TEXT");
    return parse_token_list(f.tokens);
}

}  // namespace minfer::cli
