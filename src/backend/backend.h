#pragma once
// A backend executes forward-pass graphs (model/graph.h) on one device and owns what lives
// there: the activation buffers the graphs declare, the paged KV cache, the logits. It executes
// exactly what a graph says: every input an op reads is named by the op, every parameter carried
// by it (model/op_def.h). Three implement it: cpu/ (the default), reference/ (the oracle) and
// vulkan/ (GPUs); backend/device.h picks one.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "model/graph.h"
#include "model/kv_spec.h"

namespace minfer {

class ThreadPool;

struct BackendOptions {
    int64_t n_vocab = 0;  // logits width; token ids are checked against it
    KvCacheSpec kv;       // the cache to allocate
    // Every row's results independent of the batch around it (bit-identical logits whether a
    // sequence runs alone or beside others, in one prompt chunk or many). False lets one-token
    // matmuls take the GEMV kernels (kernels/matmul.h: faster on some CPUs, not on others).
    bool batch_invariant = true;
    // Let the backend keep its own copies of the weights in a layout its kernels read faster
    // (the CPU backend's interleaved layout, kernels/packed_layout.h; same results bit for bit).
    // False keeps every weight zero-copy in the mapped file (--no-repack).
    bool repack_weights = true;
    // Called once per executed op with its time when set (MINFER_TRACE in the CLI).
    std::function<void(const Op& op, double micros)> trace;
};

// What a device with memory of its own (a GPU) has done since the process opened it (the backends
// on one device share these counts): how often the host handed it work and waited, what crossed
// between host and device memory (weights: this backend's), and the Khronos validation layer's
// findings where it is on (MINFER_VULKAN_VALIDATION=1).
struct DeviceTransfers {
    uint64_t submissions = 0;      // queue submissions
    uint64_t dispatches = 0;       // kernels launched (compute dispatches)
    uint64_t recordings = 0;       // command buffers recorded (not a pass submitted as before)
    uint64_t host_waits = 0;       // waits of the host for the device
    uint64_t bytes_up = 0;         // host -> device, weights included
    uint64_t bytes_down = 0;       // device -> host
    uint64_t weight_bytes_up = 0;  // of bytes_up: weights (all at load, none per pass)
    uint64_t weight_bytes_imported = 0;  // weights the device reads in place in the mapped file
    int validation_errors = 0;
    std::string first_validation_error;
};

class Backend {
  public:
    virtual ~Backend() = default;
    virtual std::string_view name() const = 0;

    // Validates and runs every op of the graph (storing its tokens' K and V at their slots).
    // Throws UsageError for an inconsistent graph, before anything runs.
    virtual void execute(const Graph& graph) = 0;
    // Logits of the last executed graph: [n_outputs][n_vocab].
    virtual std::span<const float> logits() const = 0;

    // Does once, before the first execute, what the graph's weights need (the CPU backend packs
    // them in its interleaved layout); execute() does it too for weights it has not seen. The
    // engine calls it at start with a one-token graph. Default: nothing.
    virtual void prepare(const Graph&) {}
    // Bytes of weight copies the backend holds beyond the mapped file (0: none).
    virtual std::size_t weight_copy_bytes() const { return 0; }

    // Copies the first n_positions positions of cache block `from` to block `to` in every layer
    // (copy on write of a shared block).
    virtual void copy_kv_block(int32_t from, int32_t to, int64_t n_positions) = 0;

    virtual std::size_t kv_cache_bytes() const = 0;
    virtual std::size_t scratch_bytes() const = 0;

    // Bytes of weights the last execute() read: every weight an op used (matrices, vectors), the
    // embedding rows it looked up, and of an expert tensor only the experts some row picked (a
    // decode step of several sequences reads the union of theirs). 0 when a backend does not
    // count (the bench's roofline then uses Model::bytes_per_token).
    virtual uint64_t weight_bytes_read() const { return 0; }

    // A device backend's counts (nullopt for the host backends).
    virtual std::optional<DeviceTransfers> device_transfers() const { return std::nullopt; }

    // The first `count` values of f32 activation buffer `id` after the last execute: what a
    // split pass carries from this backend's layers to the next backend's (split_backend.h).
    // The host backends (cpu, reference) hold them; the default throws UnsupportedError.
    virtual std::span<const float> activation_values(BufferId id, std::size_t count) const;
};

// What every backend checks before executing a graph: Graph::validate against the cache's
// slots, then that the graph's KV block size, logits width and cache layers match `options`.
// Throws UsageError naming what differs.
void validate_graph_for(const Graph& graph, const BackendOptions& options);

// Runs on `pool` (shared; see core/thread_pool.h), which must outlive the backend.
std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options, ThreadPool& pool);

}  // namespace minfer
