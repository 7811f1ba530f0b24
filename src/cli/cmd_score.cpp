// `minfer score MODEL`: teacher-forced evaluation. For every position, the top-K next tokens with
// logit and log-probability; --json prints a document shaped like the golden files.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>

#include "cli/commands.h"
#include "cli/context_flags.h"
#include "cli/model_loading.h"
#include "cli/prompt_tokens.h"
#include "core/error.h"
#include "runtime/generation.h"

namespace minfer::cli {
namespace {

struct PositionScore {
    double logsumexp = 0;
    std::vector<std::pair<int32_t, float>> top;  // (id, logit), best first
};

PositionScore score_position(std::span<const float> logits, int top_k) {
    PositionScore s;
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    s.logsumexp = max + std::log(sum);
    std::vector<int32_t> ids(logits.size());
    std::iota(ids.begin(), ids.end(), 0);
    const auto k = std::min<std::size_t>(static_cast<std::size_t>(top_k), ids.size());
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
        [&](int32_t a, int32_t b) {
            return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)] ||
                   (logits[static_cast<std::size_t>(a)] == logits[static_cast<std::size_t>(b)] &&
                    a < b);
        });
    for (std::size_t i = 0; i < k; ++i)
        s.top.emplace_back(ids[i], logits[static_cast<std::size_t>(ids[i])]);
    return s;
}

}  // namespace

void add_score_command(CLI::App& app) {
    struct Options {
        std::string model;
        PromptFlags prompt;
        int top = 5;
        bool json = false;
        bool dump_graph = false;
        ContextFlags context;
    };
    auto o = std::make_shared<Options>();
    CLI::App* cmd = app.add_subcommand(
        "score", "Teacher-forced evaluation: the top next tokens at every position");
    cmd->add_option("model", o->model, kModelHelp)->required();
    add_prompt_flags(cmd, o->prompt);
    cmd->add_option("--top", o->top, "How many of the best next tokens to show per position")
        ->check(CLI::Range(1, 1000))
        ->capture_default_str();
    auto* json = cmd->add_flag("--json", o->json,
                               "Print one JSON document like ../shared/fixtures/golden/*.json");
    cmd->add_flag("--dump-graph", o->dump_graph,
                  "Print the forward pass's operations without running it")
        ->excludes(json);
    add_context_flags(cmd, o->context);
    cmd->callback([o] {
        check_prompt_flags(o->prompt);
        const LoadedModel loaded = load_model_for_cli(o->model, /*quiet=*/true);
        const Model& model = *loaded.model;
        const std::vector<int32_t> tokens = prompt_tokens(loaded, o->prompt);
        Engine engine(loaded.model, loaded.tokenizer, to_engine_options(o->context));
        if (o->dump_graph) {
            std::cout << engine.graph_for_prompt(tokens, /*all_logits=*/true).to_string();
            return;
        }
        std::vector<PositionScore> scores(tokens.size());
        SequenceParams params;
        params.prompt = tokens;
        params.generate = false;
        params.all_logits = true;
        params.on_logits = [&](int64_t pos, std::span<const float> logits) {
            scores[static_cast<std::size_t>(pos)] = score_position(logits, o->top);
        };
        generate(engine, std::move(params), nullptr);
        if (o->json) {
            nlohmann::ordered_json doc;
            doc["n_vocab"] = model.hparams().n_vocab;
            doc["prompt_tokens"] = tokens;
            auto positions = nlohmann::ordered_json::array();
            for (std::size_t i = 0; i < scores.size(); ++i) {
                auto top = nlohmann::ordered_json::array();
                for (const auto& [id, logit] : scores[i].top) top.push_back({id, logit});
                positions.push_back({{"pos", i}, {"logsumexp", scores[i].logsumexp}, {"top", top}});
            }
            doc["positions"] = std::move(positions);
            std::cout << doc.dump() << "\n";
            return;
        }
        for (std::size_t i = 0; i < scores.size(); ++i) {
            std::printf("pos %4zu  token %6d  logsumexp %9.4f  top:", i, tokens[i],
                        scores[i].logsumexp);
            for (const auto& [id, logit] : scores[i].top) {
                std::printf("  %d (%.4f, logp %.4f)", id, logit, logit - scores[i].logsumexp);
            }
            std::printf("\n");
        }
    });
}

}  // namespace minfer::cli
