// Sampler speed on a Qwen2-sized vocabulary (151,936 logits): the time to pick one token, greedy
// and with llama.cpp's default chain (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8), with
// and without a repetition penalty. Every decoding sequence pays it once per step, so with 16
// sequences it is 16 times this per step.
//
//   ./build/release/bench/bench_sampling

#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "sampling/sampler.h"

namespace {

constexpr int32_t kVocab = 151936;

std::vector<float> random_logits() {
    std::mt19937 rng(1);
    std::normal_distribution<float> logit(0.0f, 3.0f);
    std::vector<float> logits(kVocab);
    for (float& l : logits) l = logit(rng);
    return logits;
}

void sample(benchmark::State& state, minfer::SamplingParams params) {
    const std::vector<float> logits = random_logits();
    minfer::Sampler sampler(params, kVocab);
    for (int32_t t = 0; t < 64; ++t) sampler.accept(t * 97);
    for (auto _ : state) benchmark::DoNotOptimize(sampler.sample(logits));
}

void BM_Greedy(benchmark::State& state) {
    minfer::SamplingParams p;
    p.temperature = 0.0f;
    sample(state, p);
}

void BM_GreedyWithPenalty(benchmark::State& state) {
    minfer::SamplingParams p;
    p.temperature = 0.0f;
    p.repeat_penalty = 1.1f;
    sample(state, p);
}

void BM_DefaultChain(benchmark::State& state) {
    sample(state, minfer::SamplingParams{});
}

}  // namespace

BENCHMARK(BM_Greedy)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GreedyWithPenalty)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DefaultChain)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
