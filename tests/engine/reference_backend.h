#pragma once
// A deliberately naive backend for the tests: it executes a forward-pass graph (model/graph.h) op
// by op with scalar loops on one thread, from nothing but what the graph says (the op semantics
// documented in graph.h). It shares no kernel with the CPU backend: weights are dequantized to f32
// row by row (quant/dequantize.h) and every dot product is accumulated in double. If it agrees
// with the CPU backend, the graph describes the whole forward pass.
//
// Its KV cache keeps every stored K and V as f32, rounded the way the cache type would store
// them (f16: through a half; q8_0: quantized per 32 values and dequantized back; f32: as is).

#include <memory>

#include "backend/backend.h"

namespace minfer::test {

std::unique_ptr<Backend> make_reference_backend(const BackendOptions& options);

}  // namespace minfer::test
