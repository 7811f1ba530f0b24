#include "cli/prompt_tokens.h"

#include "cli/token_list.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace minfer::cli {

void add_prompt_flags(CLI::App* cmd, PromptFlags& f) {
    auto* tokens = cmd->add_option("--tokens", f.tokens,
                                   "Token ids: 1,2,3 or \"1 2 3\" or [1, 2, 3] (tokenize --ids)");
    auto* prompt =
        cmd->add_option("-p,--prompt", f.prompt, "Text, tokenized with the model's vocabulary");
    tokens->excludes(prompt);
    prompt->each([&f](const std::string&) { f.has_prompt = true; });
}

void check_prompt_flags(PromptFlags& f) {
    if (f.has_prompt) return;
    if (f.tokens.empty()) throw UsageError("give the input as --tokens 1,2,3 or --prompt TEXT");
    f.ids = parse_token_list(f.tokens, "--tokens");
}

std::vector<int32_t> prompt_tokens(const LoadedModel& model, const PromptFlags& f) {
    if (f.has_prompt) {
        // As llama.cpp tokenizes a prompt: BOS/EOS per the model, special-token text parsed.
        return model.tokenizer->tokenize(f.prompt, /*add_special=*/true, /*parse_special=*/true);
    }
    const std::vector<int32_t> ids = f.ids ? *f.ids : parse_token_list(f.tokens, "--tokens");
    check_token_ids(ids, model.model->hparams().n_vocab, "--tokens");
    return ids;
}

}  // namespace minfer::cli
