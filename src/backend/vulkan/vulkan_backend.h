#pragma once
// The Vulkan backend (`--device vulkan[:N]`): executes forward-pass graphs (model/graph.h) with
// compute shaders on one Vulkan device. docs/vulkan.md describes what it does and what it does
// not do yet; in short:
//   - weights are uploaded once, in their GGUF block layout, to device-local buffers (never
//     dequantized on the host) when a graph first names them (the engine's prepare() at start);
//   - a forward pass is one queue submission: the batch's inputs written to a host-visible
//     buffer, every op recorded as one dispatch with a barrier after it, the wanted logits
//     copied to a host-visible buffer in the same command buffer, one host wait;
//   - the KV cache lives in device memory, f16 or f32, one K and one V buffer per layer, in the
//     engine's paged layout (slot = block * block_size + offset);
//   - the shaders are the portable ones (no 8/16-bit storage, no integer dot products, no
//     cooperative matrices): every op's sums in a fixed order, so results are bit-identical run
//     to run and whatever else is in the batch.

#include <memory>

#include "backend/backend.h"

namespace minfer {

// Opens vulkan:device_index. Throws UnsupportedError naming what is missing: Vulkan, the device,
// a KV cache type it does not store (q8_0).
std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions& options, int device_index);

}  // namespace minfer
