#pragma once
// The reference backend (`--device reference`): a deliberately naive backend that executes a
// forward-pass graph (model/graph.h) op by op with scalar loops on one thread, from nothing but
// what the graph says (the op semantics documented in graph.h and op_def.h). It shares no kernel
// with the CPU backend: weights are dequantized to f32 row by row (quant/dequantize.h) and every
// dot product, norm and softmax is accumulated in double. It is the oracle the CPU and GPU
// backends are tested against, and a tool for anyone who suspects a kernel: if a model answers
// differently with --device reference, a kernel is wrong. It is slow (a 0.5B model decodes about
// a token a second).
//
// Its KV cache keeps every stored K and V as f32, rounded the way the cache type would store
// them (f16: through a half; q8_0: quantized per 32 values and dequantized back; f32: as is).

#include <memory>

#include "backend/backend.h"

namespace minfer {

std::unique_ptr<Backend> make_reference_backend(const BackendOptions& options);

}  // namespace minfer
