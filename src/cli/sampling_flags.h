#pragma once
// The sampling flags of `run`, `chat` and `serve`, with llama.cpp's names and defaults.

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace minfer::cli {

struct SamplingFlags {
    SamplingParams params;
    std::vector<std::string> logit_bias;           // "ID+BIAS", "ID-BIAS", "ID=BIAS", "ID-inf"
    std::string seed = "-1";                       // -1: random; else 0 .. 2^64-1
    std::vector<const CLI::Option*> draw_options;  // meaningless with --temp 0
};

enum class SamplingFlagsUse {
    Generation,       // run, chat: the flags are what is used (--top-k with --temp 0 is warned of)
    RequestDefaults,  // serve: defaults that each request may override
};

void add_sampling_flags(CLI::App* cmd, SamplingFlags& flags);
// The parameters with the logit bias parsed and the seed chosen; throws UsageError.
SamplingParams to_sampling_params(const SamplingFlags& flags,
                                  SamplingFlagsUse use = SamplingFlagsUse::Generation);

}  // namespace minfer::cli
