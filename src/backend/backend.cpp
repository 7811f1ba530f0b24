#include "backend/backend.h"

#include "core/error.h"

namespace minfer {

std::span<const float> Backend::activation_values(BufferId, std::size_t) const {
    throw UnsupportedError(concat("the ", name(), " backend keeps its activations to itself"));
}

void validate_graph_for(const Graph& g, const BackendOptions& options) {
    g.validate(options.n_vocab, options.kv.n_slots());
    if (g.kv_block_size != options.kv.block_size)
        throw UsageError("graph: KV block size differs from the cache's");
    if (g.logits != kNoBuffer &&
        g.buffers[static_cast<std::size_t>(g.logits)].width != options.n_vocab)
        throw UsageError("graph: the logits buffer is not as wide as the vocabulary");
    for (const Op& op : g.ops) {
        if (op.type != OpType::StoreKv && op.type != OpType::Attention) continue;
        const auto& layers = options.kv.layers;
        if (op.kv_layer >= static_cast<int>(layers.size()))
            throw UsageError(concat("graph: cache layer ", op.kv_layer, " does not exist"));
        const KvLayerShape& l = layers[static_cast<std::size_t>(op.kv_layer)];
        if (l.n_head_kv != op.attn.n_head_kv || l.head_dim_k != op.attn.head_dim_k ||
            l.head_dim_v != op.attn.head_dim_v)
            throw UsageError(concat("graph: cache layer ", op.kv_layer, " has another shape"));
    }
}

}  // namespace minfer
