#pragma once
// Rotary position embedding with ggml's arithmetic: for the pair i of a head,
// theta_i = pos * freq_scale / freq_factor_i * base^(-2i / n_rot), the power computed as ggml does
// (a running product of base^(-2 / n_rot) in f32). The cos/sin of every token of a micro-batch are
// computed once per graph and shared by all heads and layers.

#include <cstdint>
#include <span>
#include <vector>

#include "model/architecture.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace minfer {

class RopeTable {
public:
    void prepare(const HParams& hp, RopeKind kind, const Weight& freq_factors, std::span<const int32_t> positions);
    // Rotates the first n_rot values of one head of token `t` (its index in the batch) in place.
    void apply(float* head, int64_t t) const;

private:
    RopeKind kind_ = RopeKind::Normal;
    int64_t n_rot_ = 0;
    std::vector<float> cos_sin_;  // [n_tokens][n_rot]: cos, sin of each pair
};

}  // namespace minfer
