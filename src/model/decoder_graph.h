#pragma once
// Records the forward pass of a pre-norm decoder (llama, qwen2, qwen3) for one micro-batch.

#include <cstdint>
#include <span>

#include "model/architecture.h"
#include "model/graph.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace minfer {

// tokens[i] sits at position pos0 + i; logits are computed for the batch rows in output_rows
// (ascending). The graph points at `weights`, which must outlive it.
Graph build_decoder_graph(const Architecture& arch, const HParams& hp, const ModelWeights& weights,
                          std::span<const int32_t> tokens, int32_t pos0,
                          std::span<const int32_t> output_rows);

}  // namespace minfer
