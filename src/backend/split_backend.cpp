#include "backend/split_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "model/op_def.h"

namespace minfer {
namespace {

bool reads(Access access) {
    return access == Access::kRead || access == Access::kReadWrite;
}
bool writes(Access access) {
    return access == Access::kWrite || access == Access::kReadWrite;
}

bool uses_cache(const Op& op) {
    return op.type == OpType::StoreKv || op.type == OpType::Attention;
}

// A part of `graph`: its ops [begin, end), every buffer it does not name declared with no rows.
Graph part_of(const Graph& graph, std::size_t begin, std::size_t end) {
    Graph part;
    part.buffers = graph.buffers;
    part.ops.assign(graph.ops.begin() + static_cast<std::ptrdiff_t>(begin),
                    graph.ops.begin() + static_cast<std::ptrdiff_t>(end));
    part.in = graph.in;
    part.kv_block_size = graph.kv_block_size;
    std::vector<bool> named(graph.buffers.size(), false);
    for (const Op& op : part.ops) {
        for (int i = 0; i < 3; ++i) {
            const BufferId b = operand_buffer(op, i);
            if (b != kNoBuffer && static_cast<std::size_t>(b) < named.size())
                named[static_cast<std::size_t>(b)] = true;
        }
    }
    for (std::size_t b = 0; b < named.size(); ++b) {
        if (!named[b]) part.buffers[b].rows = 0;
    }
    return part;
}

class SplitBackend final : public Backend {
  public:
    SplitBackend(std::unique_ptr<Backend> front, std::unique_ptr<Backend> back,
                 int first_back_layer)
        : front_(std::move(front)), back_(std::move(back)), first_back_layer_(first_back_layer) {}

    std::string_view name() const override { return "split"; }

    void execute(const Graph& graph) override {
        SplitGraphs parts = split_graph(graph, first_back_layer_);
        front_->execute(parts.front);
        for (CarriedRows& c : parts.back.carried_in) {
            const std::span<const float> rows = front_->activation_values(
                c.buffer, static_cast<std::size_t>(
                              c.rows * graph.buffers[static_cast<std::size_t>(c.buffer)].width));
            c.values.assign(rows.begin(), rows.end());
        }
        back_->execute(parts.back);
    }
    std::span<const float> logits() const override { return back_->logits(); }

    void prepare(const Graph& graph) override {
        const SplitGraphs parts = split_graph(graph, first_back_layer_);
        front_->prepare(parts.front);
        back_->prepare(parts.back);
    }
    std::size_t weight_copy_bytes() const override {
        return front_->weight_copy_bytes() + back_->weight_copy_bytes();
    }
    void copy_kv_block(int32_t from, int32_t to, int64_t n_positions) override {
        front_->copy_kv_block(from, to, n_positions);
        back_->copy_kv_block(from, to, n_positions);
    }
    std::size_t kv_cache_bytes() const override {
        return front_->kv_cache_bytes() + back_->kv_cache_bytes();
    }
    std::size_t scratch_bytes() const override {
        return front_->scratch_bytes() + back_->scratch_bytes();
    }
    uint64_t weight_bytes_read() const override {
        return front_->weight_bytes_read() + back_->weight_bytes_read();
    }
    std::optional<DeviceTransfers> device_transfers() const override {
        return back_->device_transfers();
    }

  private:
    std::unique_ptr<Backend> front_, back_;
    int first_back_layer_;
};

}  // namespace

SplitGraphs split_graph(const Graph& graph, int first_back_layer) {
    const auto first_back = std::find_if(graph.ops.begin(), graph.ops.end(), [&](const Op& op) {
        return op.layer >= first_back_layer;
    });
    if (first_back_layer < 1 || first_back == graph.ops.end())
        throw UsageError(concat("graph: no layer ", first_back_layer, " to split the pass at"));
    const auto cut = static_cast<std::size_t>(first_back - graph.ops.begin());
    for (std::size_t i = 0; i < graph.ops.size(); ++i) {
        const Op& op = graph.ops[i];
        const bool in_back = i >= cut;
        if (!in_back && op.layer >= first_back_layer)
            throw UsageError(concat("graph op ", op_name(op), ": out of layer order"));
        if (in_back && op.layer >= 0 && op.layer < first_back_layer)
            throw UsageError(concat("graph op ", op_name(op), ": out of layer order"));
        if (uses_cache(op) && (op.kv_layer >= first_back_layer) != in_back)
            throw UsageError(concat("graph op ", op_name(op), ": cache layer ", op.kv_layer,
                                    " is on the other side of the split"));
        // (The parts are validated by their backends; the buffers are indexed here first.)
        for (int k = 0; k < 3; ++k) {
            const BufferId b = operand_buffer(op, k);
            if (op_def(op.type).operand(k).access != Access::kUnused &&
                (b < 0 || static_cast<std::size_t>(b) >= graph.buffers.size()))
                throw UsageError(
                    concat("graph op ", op_name(op), ": buffer ", b, " is not declared"));
        }
    }

    SplitGraphs parts{part_of(graph, 0, cut), part_of(graph, cut, graph.ops.size())};
    for (Op& op : parts.back.ops) {
        if (uses_cache(op)) op.kv_layer -= first_back_layer;
    }
    parts.back.logits = graph.logits;
    // What the back reads before it writes it, of what the front wrote: carried across.
    std::vector<bool> front_wrote(graph.buffers.size(), false);
    std::vector<bool> back_has(graph.buffers.size(), false);
    for (const Op& op : parts.front.ops) {
        for (int i = 0; i < 3; ++i) {
            if (writes(op_def(op.type).operand(i).access))
                front_wrote[static_cast<std::size_t>(operand_buffer(op, i))] = true;
        }
    }
    for (const Op& op : parts.back.ops) {
        for (int i = 0; i < 3; ++i) {
            const Access access = op_def(op.type).operand(i).access;
            const BufferId b = operand_buffer(op, i);
            if (access == Access::kUnused) continue;
            const auto at = static_cast<std::size_t>(b);
            if (reads(access) && !back_has[at] && front_wrote[at]) {
                parts.back.carried_in.push_back({b, graph.buffers[at].rows, {}});
                parts.front.buffers[at].rows = graph.buffers[at].rows;
            }
            back_has[at] = true;
        }
    }
    return parts;
}

BackendOptions front_options(const BackendOptions& options, int first_back_layer) {
    BackendOptions o = options;
    o.kv.layers.resize(std::min(o.kv.layers.size(), static_cast<std::size_t>(first_back_layer)));
    return o;
}

BackendOptions back_options(const BackendOptions& options, int first_back_layer) {
    BackendOptions o = options;
    const auto skip = std::min(o.kv.layers.size(), static_cast<std::size_t>(first_back_layer));
    o.kv.layers.erase(o.kv.layers.begin(), o.kv.layers.begin() + static_cast<std::ptrdiff_t>(skip));
    return o;
}

std::unique_ptr<Backend> make_split_backend(std::unique_ptr<Backend> front,
                                            std::unique_ptr<Backend> back, int first_back_layer) {
    return std::make_unique<SplitBackend>(std::move(front), std::move(back), first_back_layer);
}

}  // namespace minfer
