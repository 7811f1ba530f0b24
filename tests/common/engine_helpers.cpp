#include "common/engine_helpers.h"

#include <algorithm>
#include <cmath>

#include "runtime/generation.h"

namespace minfer::test {

TestEngine make_engine(const std::filesystem::path& model_path, const EngineOptions& options) {
    TestEngine t{load_model(model_path.string()), nullptr};
    t.engine = std::make_unique<Engine>(t.model.model, t.model.tokenizer, options);
    return t;
}

Graph one_token_graph(const Model& model, int64_t n_ctx) {
    BatchInputs in;
    in.tokens = {1};
    in.positions = {0};
    in.kv_slots = {0};
    in.sequence = {0};
    in.table_begin = {0, 1};
    in.table_blocks = {0};
    in.output_rows = {0};
    return model.record(std::move(in), kKvBlockSize, n_ctx);
}

LogitRows evaluate_all(Engine& engine, const std::vector<int32_t>& tokens) {
    LogitRows rows(tokens.size());
    SequenceParams p;
    p.prompt = tokens;
    p.generate = false;
    p.all_logits = true;
    p.on_logits = [&](int64_t pos, std::span<const float> logits) {
        rows[static_cast<std::size_t>(pos)].assign(logits.begin(), logits.end());
    };
    const Generation g = generate(engine, std::move(p), nullptr);
    engine.release(g.id);
    return rows;
}

BatchedRun run_together(Engine& engine, const std::vector<int32_t>& text,
                        const std::vector<std::ptrdiff_t>& lengths, int64_t n_predict) {
    BatchedRun run;
    run.rows.resize(lengths.size());
    std::vector<SeqId> ids;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        SequenceParams p;
        p.prompt.assign(text.begin(), text.begin() + lengths[i]);
        p.sampling.temperature = 0.0f;
        p.n_predict = n_predict;
        p.ignore_eog = true;
        p.all_logits = true;
        p.on_logits = [&run, i](int64_t pos, std::span<const float> row) {
            run.rows[i][pos].assign(row.begin(), row.end());
        };
        ids.push_back(engine.submit(std::move(p)));
    }
    while (engine.busy()) {
        int sampled = 0;
        for (const auto& e : engine.step()) sampled += e.token >= 0 ? 1 : 0;
        run.most_sampled = std::max(run.most_sampled, sampled);
        if (++run.steps >= BatchedRun::kMaxSteps) return run;
    }
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        const SequenceResult& r = engine.result(ids[i]);
        std::vector<int32_t> tokens(text.begin(), text.begin() + lengths[i]);
        if (!r.tokens.empty()) tokens.insert(tokens.end(), r.tokens.begin(), r.tokens.end() - 1);
        run.evaluated.push_back(std::move(tokens));
        run.n_generated.push_back(r.tokens.size());
    }
    return run;
}

int32_t argmax(const std::vector<float>& logits) {
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

namespace {

std::vector<double> log_softmax(std::span<const float> logits) {
    double max = -INFINITY;
    for (const float v : logits) max = std::max(max, static_cast<double>(v));
    double sum = 0;
    for (const float v : logits) sum += std::exp(static_cast<double>(v) - max);
    const double log_sum = max + std::log(sum);
    std::vector<double> out(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i)
        out[i] = static_cast<double>(logits[i]) - log_sum;
    return out;
}

}  // namespace

double max_logprob_difference(std::span<const float> a, std::span<const float> b) {
    if (a.size() != b.size()) return INFINITY;
    const std::vector<double> la = log_softmax(a), lb = log_softmax(b);
    double worst = 0;
    for (std::size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::abs(la[i] - lb[i]));
    return worst;
}

const std::vector<std::string>& engine_fixture_models() {
    static const std::vector<std::string> models = {
        "stories260K.gguf",       "tiny-llama-f16.gguf",    "tiny-llama-q8_0.gguf",
        "tiny-llama-q4_0.gguf",   "tiny-llama-q4_k_m.gguf", "tiny-qwen2-f16.gguf",
        "tiny-qwen2-q8_0.gguf",   "tiny-qwen2-q4_k_m.gguf", "tiny-qwen3-q8_0.gguf",
        "tiny-gemma2-f16.gguf",   "tiny-gemma2-q8_0.gguf",  "tiny-gemma3-f16.gguf",
        "tiny-gemma3-q8_0.gguf",  "tiny-phi3-f16.gguf",     "tiny-phi3-q8_0.gguf",
        "tiny-mixtral-f16.gguf",  "tiny-mixtral-q8_0.gguf", "tiny-qwen3moe-f16.gguf",
        "tiny-qwen3moe-q8_0.gguf"};
    return models;
}

}  // namespace minfer::test
