#pragma once
// Driving the engine from tests: an engine over a fixture model, the logits of every position of
// a token sequence, greedy continuations.

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "runtime/loaded_model.h"

namespace minfer::test {

struct TestEngine {
    LoadedModel model;
    std::unique_ptr<Engine> engine;
};

TestEngine make_engine(const std::filesystem::path& model_path, const EngineOptions& options);

using LogitRows = std::vector<std::vector<float>>;  // [position][n_vocab]

// The graph of one token (id 1) at position 0 of one sequence (cache block 0), its logits wanted,
// for sequences of n_ctx positions.
Graph one_token_graph(const Model& model, int64_t n_ctx = 512);

// Every position's logits of `tokens` evaluated as one fresh sequence.
LogitRows evaluate_all(Engine& engine, const std::vector<int32_t>& tokens);

// Sequences whose prompts are the first lengths[i] tokens of `text`, submitted before the first
// step and run together to the end, each greedy for n_predict tokens (end of generation ignored)
// with the logits of every position. Stops after kMaxSteps steps (an engine that does not finish:
// the caller asserts steps < kMaxSteps).
struct BatchedRun {
    static constexpr int kMaxSteps = 100;
    std::vector<std::map<int64_t, std::vector<float>>> rows;  // [sequence][position] logits
    // [sequence]: its prompt and every generated token but the last (never evaluated): what to
    // evaluate alone to compare with rows
    std::vector<std::vector<int32_t>> evaluated;
    std::vector<std::size_t> n_generated;  // [sequence]
    int steps = 0;
    int most_sampled = 0;  // the most sequences sampled in one step
};
BatchedRun run_together(Engine& engine, const std::vector<int32_t>& text,
                        const std::vector<std::ptrdiff_t>& lengths, int64_t n_predict);

// The index of the largest logit (the smallest index among equal ones).
int32_t argmax(const std::vector<float>& logits);

// Largest |log_softmax(a) - log_softmax(b)| over the vocabulary (rows of equal length).
double max_logprob_difference(std::span<const float> a, std::span<const float> b);

// The fixture models the engine runs (every architecture and weight type with golden data).
const std::vector<std::string>& engine_fixture_models();  // file names under fixtures/models

}  // namespace minfer::test
