#pragma once
// The pre-norm decoder of llama, qwen2 and qwen3: per layer, RMSNorm -> Q/K/V projections
// (+ biases, + per-head Q/K norms when the layer config says) -> RoPE -> attention over the paged
// cache -> output projection -> residual; RMSNorm -> SwiGLU feed-forward -> residual. Tied or
// separate output matrix, optional Llama 3.1 RoPE frequency factors.

#include <memory>

#include "model/architecture.h"

namespace minfer {

std::unique_ptr<ModelGraph> bind_decoder(WeightBinder& binder, const ModelConfig& config);

}  // namespace minfer
