#pragma once
// A forward pass split at a layer boundary between two backends (`-ngl N`, llama.cpp's
// --gpu-layers: the last N layers and the output on the GPU, the layers before on the CPU). Each
// backend executes its part of every graph and owns the KV cache of its layers; the activations
// cross once per pass, from the first backend's host memory into the second's graph
// (Graph::carried_in). Both backends see the same batch inputs, so prefix sharing, copy on write
// and preemption work unchanged.

#include <memory>

#include "backend/backend.h"

namespace minfer {

// A graph cut before the first op of layer `first_back_layer`: the front runs the ops before
// (the embedding lookup and layers 0 .. first_back_layer - 1), the back the rest, with its cache
// layers numbered from 0 (the back's layer first_back_layer is its cache layer 0) and carrying
// in what the front wrote and it reads (the residual stream). Buffers a part does not use are
// declared with no rows. Throws UsageError where the graph's ops are not in layer order or a
// part would read another's cache layers.
struct SplitGraphs {
    Graph front, back;
};
SplitGraphs split_graph(const Graph& graph, int first_back_layer);

// The backends' options: `options` with the cache layers of each part.
BackendOptions front_options(const BackendOptions& options, int first_back_layer);
BackendOptions back_options(const BackendOptions& options, int first_back_layer);

// A backend over `front` (made with front_options) and `back` (back_options). The front must
// keep its activations in host memory (the CPU and reference backends).
std::unique_ptr<Backend> make_split_backend(std::unique_ptr<Backend> front,
                                            std::unique_ptr<Backend> back, int first_back_layer);

}  // namespace minfer
