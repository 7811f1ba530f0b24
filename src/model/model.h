#pragma once
// A loaded model: the mapped GGUF file, its architecture, its configuration (global
// hyperparameters and one LayerConfig per layer) and the bound weights, which record the forward
// pass of any batch as a Graph. Immutable once loaded and shared by every engine that uses it.

#include <filesystem>
#include <memory>

#include "gguf/gguf_file.h"
#include "model/architecture.h"
#include "model/graph.h"
#include "model/hparams.h"
#include "model/kv_spec.h"

namespace minfer {

class Model {
  public:
    // Maps and validates the file (or split model); throws minfer::Error naming what is wrong.
    static std::shared_ptr<const Model> load(const std::filesystem::path& path);

    struct PrivateKey {};  // only load() constructs models
    Model(PrivateKey, GgufFile file);
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const GgufFile& file() const { return file_; }
    const GgufMetadata& metadata() const { return file_.metadata(); }
    const Architecture& arch() const { return *arch_; }
    const HParams& hparams() const { return config_.hp; }
    const std::vector<LayerConfig>& layers() const { return config_.layers; }

    // The forward pass of a batch (see ModelGraph::record).
    Graph record(BatchInputs in, int64_t kv_block_size, int64_t n_ctx) const {
        return graph_->record(std::move(in), kv_block_size, n_ctx);
    }
    // The sliding window every layer's attention shares (0 when a layer sees every earlier
    // position): positions that far behind a sequence's end can be dropped from its cache.
    int64_t kv_window() const;
    // The KV cache this model needs: one cache layer per block, n_blocks blocks of `type`.
    KvCacheSpec kv_cache_spec(GgmlType type, int64_t n_blocks) const;

    uint64_t n_params() const;      // elements of every tensor
    uint64_t weight_bytes() const;  // bytes of every tensor in the file(s)
    // Bytes of weights read to decode one token, from what the architecture bound: every
    // tensor once, the embedding table as one row (all of it when it is also the output).
    uint64_t bytes_per_token() const { return bytes_per_token_; }

  private:
    GgufFile file_;
    const Architecture* arch_;
    ModelConfig config_;
    std::unique_ptr<ModelGraph> graph_;
    uint64_t bytes_per_token_ = 0;
};

}  // namespace minfer
