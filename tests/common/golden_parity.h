#pragma once
// The golden parity check every backend's tests share: an engine's logits for every position of
// every golden case against llama.cpp's, within the golden tolerance (test assertions inside),
// allowing a mixture of experts a router near-tie now and then (routing_tolerance).

#include <cstddef>
#include <string>

#include "common/golden.h"
#include "engine/engine.h"

namespace minfer::test {

struct ParityFigures {
    double worst = 0;           // max |dlogprob| at positions with the reference's routing
    double worst_rerouted = 0;  // and at the others
    std::size_t n_positions = 0, n_rerouted = 0;
    double tolerance = 0, routing_tolerance = 0;
    std::string summary() const;  // "max |dlogprob| 0.0123 (tolerance 0.0456)[; 1 rerouted ...]"
};

// `tolerance`: the golden's, or more for a cache type other than the reference's f16.
// `max_cases`: the first golden cases only (0: all).
ParityFigures check_golden_parity(Engine& engine, const Golden& golden, double tolerance,
                                  std::size_t max_cases = 0);

}  // namespace minfer::test
