#pragma once
// The pre-norm decoder that llama, qwen2, qwen3, qwen3moe, gemma2, gemma3 and phi3 share, each
// layer as its LayerConfig says: RMSNorm -> Q/K/V projections (separate or one fused matrix,
// + biases, + per-head Q/K norms) -> RoPE (with Llama 3.1's or LongRoPE's frequency factors) ->
// [Q scaled] -> attention over the paged cache (soft-capped, windowed) -> output projection
// [-> post-attention norm] -> residual; RMSNorm -> feed-forward (SwiGLU or GELU-gated, gate and
// up separate or fused; or a mixture of experts) [-> post-FFN norm] -> residual. Embeddings
// optionally scaled, tied or separate output matrix, optional final soft-capping.

#include <memory>

#include "model/architecture.h"

namespace minfer {

std::unique_ptr<ModelGraph> bind_decoder(WeightBinder& binder, const ModelConfig& config);

}  // namespace minfer
