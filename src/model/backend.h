#pragma once
// A backend executes a whole forward-pass Graph on one device and owns what lives there: the
// activation buffers, the KV cache, the logits. The CPU backend comes first; a CUDA backend
// implements the same interface and runs a graph without a host round trip per operation.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gguf/ggml_type.h"
#include "model/graph.h"
#include "model/model.h"

namespace minfer {

struct BackendOptions {
    int64_t n_ctx = 0;      // KV cache length (positions)
    int64_t n_batch = 512;  // largest micro-batch a graph may hold
    int n_threads = 1;
    bool pin_threads = true;
    GgmlType kv_type = GgmlType::F16;
    // Called once per executed op with its time when set (MINFER_TRACE=1 in the CLI).
    std::function<void(const Op& op, double micros)> trace;
};

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;
    // Runs every op of the graph, appending its K/V rows to the cache at their positions.
    virtual void execute(const Graph& graph) = 0;
    // Logits of the last executed graph: [n_outputs][n_vocab].
    virtual std::span<const float> logits() const = 0;
    virtual std::size_t kv_cache_bytes() const = 0;
    virtual std::size_t scratch_bytes() const = 0;
};

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options);

}  // namespace minfer
