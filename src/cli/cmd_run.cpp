// `minfer run MODEL --tokens 1,2,3 -n N --temp 0`: greedy continuation printed as ids.

#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/prompt_tokens.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "model/context.h"

namespace minfer::cli {

void add_run_command(CLI::App& app) {
    struct Options {
        std::string model;
        PromptFlags prompt;
        int n_predict = 32;
        float temp = 0.0f;
        ContextFlags context;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand("run", "Generate a continuation");
    cmd->add_option("model", o->model, "GGUF model file")->required();
    add_prompt_flags(cmd, o->prompt);
    cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")->check(CLI::Range(0, 1 << 24))->capture_default_str();
    cmd->add_option("--temp", o->temp, "Sampling temperature (0: greedy)")->capture_default_str();
    add_context_flags(cmd, o->context);
    cmd->callback([o] {
        if (o->temp != 0.0f) throw UnsupportedError("sampling with --temp > 0 needs the sampler, not in this build yet; use --temp 0");
        auto model = Model::load(resolve_model_path(o->model));
        std::vector<int32_t> tokens = prompt_tokens(*model, o->prompt);
        InferenceContext ctx(model, to_context_options(o->context));
        std::vector<float> logits = ctx.evaluate_last(tokens);
        for (int i = 0; i < o->n_predict; ++i) {
            const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
            std::printf(i == 0 ? "%d" : ",%d", next);
            std::fflush(stdout);
            if (i + 1 == o->n_predict) break;
            const int32_t one[1] = {next};
            logits = ctx.evaluate_last(one);
        }
        std::printf("\n");
    });
}

}  // namespace minfer::cli
