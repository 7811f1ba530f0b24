#pragma once
// The registry of model architectures (general.architecture). An architecture is data plus one
// small builder: `configure` reads the metadata into per-layer configurations, `bind` binds the
// weights those configurations call for and returns the object that records the forward pass of
// a batch as a Graph. Adding one: a file arch_NAME.cpp defining NAME_architecture() and a line in
// architecture.cpp's table; a new block structure brings its own ModelGraph (see
// decoder_graph.cpp for the pre-norm decoder that llama, qwen2, qwen3, gemma2, gemma3, phi3 and
// their mixtures of experts share).

#include <memory>
#include <string_view>
#include <vector>

#include "gguf/gguf_metadata.h"
#include "model/graph.h"
#include "model/hparams.h"
#include "model/layer_config.h"
#include "model/weights.h"

namespace minfer {

// An architecture bound to one file's weights: records the graph of any batch.
class ModelGraph {
  public:
    virtual ~ModelGraph() = default;
    // The forward pass of `in` (tokens, positions, cache slots, block tables, output rows) in a
    // cache of kv_block_size positions per block, for sequences of up to n_ctx positions (LongRoPE
    // picks its factors by it, as llama.cpp does). The graph points at weights this object owns
    // views of, so it must not outlive the model.
    virtual Graph record(BatchInputs in, int64_t kv_block_size, int64_t n_ctx) const = 0;
};

struct ModelConfig {
    HParams hp;
    std::vector<LayerConfig> layers;  // [n_layer]
    float embedding_scale = 0.0f;     // 0: none; else embeddings are multiplied by it (gemma)
    float final_softcap = 0.0f;       // 0: none; else logits = c * tanh(logits / c) (gemma2)
};

struct Architecture {
    std::string_view name;  // as in general.architecture and the metadata key prefix
    // Reads and validates the hyperparameters (hp.n_vocab is set later, from the embeddings).
    ModelConfig (*configure)(const GgufMetadata& meta);
    // Binds every tensor the configuration needs (FormatError naming a missing or misshapen
    // tensor, UnsupportedError for a type the kernels cannot use).
    std::unique_ptr<ModelGraph> (*bind)(WeightBinder& binder, const ModelConfig& config);
};

// Throws UnsupportedError listing the supported architectures.
const Architecture& find_architecture(std::string_view name);
std::vector<std::string_view> supported_architectures();

// One per file arch_*.cpp.
const Architecture& llama_architecture();
const Architecture& qwen2_architecture();
const Architecture& qwen3_architecture();
const Architecture& qwen3moe_architecture();
const Architecture& gemma2_architecture();
const Architecture& gemma3_architecture();
const Architecture& phi3_architecture();

}  // namespace minfer
