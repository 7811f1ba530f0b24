#pragma once
// The measurements of `minfer bench`, through the engine as every command runs a model: prompt
// processing and token generation, for one sequence or several decoding together, after a depth
// of tokens already in the cache. Prompts are random token ids, distinct for every sequence and
// repetition, so the prefix cache cannot help.

#include <cstdint>
#include <functional>
#include <random>

#include "engine/engine.h"

namespace minfer {

struct BenchTest {
    int64_t n_prompt = 0;    // prompt tokens (pp), or each sequence's prompt before decoding (tg)
    int64_t n_gen = 0;       // tokens decoded per sequence (tg); 0 for a pp test
    int64_t n_depth = 0;     // tokens in the cache before the measured part
    int64_t n_parallel = 1;  // sequences decoding together (tg)
};

struct BenchRun {
    double ns = 0;  // the measured part
    // tg: the weight bytes a measured step read, averaged over the steps (Backend::
    // weight_bytes_read; a mixture of experts reads the experts its tokens picked); 0 for pp or
    // a backend that does not count.
    double weight_bytes_per_step = 0;
};

// The measured part of one run:
//  pp: evaluating n_prompt tokens (in chunks of the engine's batch) after n_depth cached ones;
//  tg (n_prompt 0): n_gen forward passes of one token for each of n_parallel sequences, once
//      every sequence has evaluated its n_depth prompt tokens (at least one) and sampled;
//  pp+tg (both given, bench -np): n_parallel sequences submitted together, from the submission
//      until each has evaluated its n_prompt tokens (after n_depth cached ones) and generated
//      n_gen: prefill counted, as a server's clients pay for it.
// tg: after_step(step) is called after each measured step (0 .. n_gen - 1), outside the
// measured time (bench samples the memory bandwidth there, beside the steps it compares with).
BenchRun run_bench_test(Engine& engine, const BenchTest& test, std::mt19937& rng,
                        const std::function<void(int64_t step)>& after_step = {});

// Tokens the measured part evaluates (for tokens/s): n_prompt, or n_gen x n_parallel.
int64_t bench_tokens(const BenchTest& test);

// Positions one sequence of the test holds at most (the engine's n_ctx must be at least this).
int64_t bench_positions(const BenchTest& test);

}  // namespace minfer
