#include "model/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "model/op_def.h"

namespace minfer {

const char* dtype_name(DType type) {
    return type == DType::kI32 ? "i32" : "f32";
}

std::string op_name(const Op& op) {
    return op.layer >= 0 ? concat("blk.", op.layer, ".", op.label) : std::string(op.label);
}

BufferId GraphBuilder::buffer(const char* name, int64_t rows, int64_t width, DType type) {
    g_.buffers.push_back(BufferDecl{name, rows, width, type});
    return static_cast<BufferId>(g_.buffers.size() - 1);
}

Op& GraphBuilder::op(OpType type, const char* label, int layer, BufferId dst, int64_t rows,
                     int64_t width) {
    Op& o = g_.ops.emplace_back();
    o.type = type;
    o.label = label;
    o.layer = layer;
    o.dst = dst;
    o.rows = rows;
    o.width = width;
    return o;
}

namespace {

class Validator {
  public:
    Validator(const Graph& g, int64_t n_vocab, int64_t n_slots)
        : g_(g),
          n_vocab_(n_vocab),
          n_slots_(n_slots),
          written_rows_(g.buffers.size(), 0),
          writer_(g.buffers.size(), nullptr) {}

    void run() {
        inputs();
        carried();
        const GraphContext context{g_.in.n_tokens(), g_.in.n_outputs(), n_vocab_};
        for (const Op& op : g_.ops) this->op(op, context);
        if (g_.logits != kNoBuffer) {
            const BufferDecl& logits = buffer(g_.logits, "the logits", nullptr);
            if (written_rows_[static_cast<std::size_t>(g_.logits)] < g_.in.n_outputs())
                fail(nullptr, concat("the logits buffer '", logits.name,
                                     "' is not written for every output"));
        }
        windows_visible();
    }

  private:
    [[noreturn]] void fail(const Op* op, const std::string& what) const {
        throw UsageError(op ? concat("graph op ", op_name(*op), ": ", what)
                            : concat("graph: ", what));
    }

    const BufferDecl& buffer(BufferId id, const char* role, const Op* op) const {
        if (id < 0 || static_cast<std::size_t>(id) >= g_.buffers.size())
            fail(op, concat(role, " buffer ", id, " is not declared"));
        return g_.buffers[static_cast<std::size_t>(id)];
    }

    // The op against its definition (op_def.h): shape, weight, parameters, then every operand:
    // declared, of its type and shape, and (when read) written by an earlier op.
    void op(const Op& op, const GraphContext& context) {
        const OpDef& def = op_def(op.type);
        if (op.rows < 0 || op.rows > g_.in.n_tokens() || op.width < 1)
            fail(&op, concat("bad shape [", op.rows, ", ", op.width, "]"));
        const bool has_weight = op.weight != nullptr && *op.weight;
        if (def.weight == WeightUse::kRequired && !has_weight) fail(&op, "has no weight");
        if (def.weight == WeightUse::kNone && op.weight != nullptr) fail(&op, "takes no weight");
        if (std::string bad = def.check(op, context); !bad.empty()) fail(&op, bad);
        OperandShape shapes[3];
        def.shapes(op, context, shapes);
        for (int i = 0; i < 3; ++i) operand(op, def.operand(i), operand_buffer(op, i), shapes[i]);
        for (int i = 0; i < 3; ++i) {
            const Access access = def.operand(i).access;
            if (access != Access::kWrite && access != Access::kReadWrite) continue;
            const auto b = static_cast<std::size_t>(operand_buffer(op, i));
            written_rows_[b] = std::max(written_rows_[b], shapes[i].rows);
            writer_[b] = &op;
        }
    }

    void operand(const Op& op, const OperandDef& def, BufferId id, const OperandShape& shape) {
        if (def.access == Access::kUnused) {
            if (id != kNoBuffer) fail(&op, concat("names a buffer it does not use (", id, ")"));
            return;
        }
        const BufferDecl& b = buffer(id, def.role, &op);
        if (b.type != def.type)
            fail(&op, concat(def.role, " '", b.name, "' holds ", dtype_name(b.type), ", needs ",
                             dtype_name(def.type)));
        if (b.width != shape.width || b.rows < shape.rows)
            fail(&op, concat(def.role, " '", b.name, "' is [", b.rows, ", ", b.width, "], needs [",
                             shape.rows, ", ", shape.width, "]"));
        if (def.access == Access::kWrite) return;
        const auto at = static_cast<std::size_t>(id);
        if (written_rows_[at] < shape.rows)
            fail(&op, concat("reads ", def.role, " '", b.name, "' before an op writes it"));
        // An i32 operand holds expert ids: the backends index the experts with them unchecked,
        // which is safe when they come from a MoeRoute over the same experts.
        if (def.type == DType::kI32) {
            const Op* route = writer_[at];
            if (route->type != OpType::MoeRoute || route->moe.n_expert != op.moe.n_expert ||
                route->moe.n_used != op.moe.n_used)
                fail(&op, "its routing input is not the output of an earlier moe_route");
        }
    }

    // Every key an attention op may read lies in a block the tables hold (not a freed one).
    void windows_visible() const {
        int64_t widest = -1;  // the largest window of any attention op; 0: unlimited
        for (const Op& op : g_.ops) {
            if (op.type != OpType::Attention) continue;
            if (op.attn.window == 0) {
                widest = 0;
                break;
            }
            widest = std::max(widest, op.attn.window);
        }
        if (widest < 0) return;
        const BatchInputs& in = g_.in;
        for (std::size_t t = 0; t < in.tokens.size(); ++t) {
            const int64_t pos = in.positions[t];
            const int64_t first = widest == 0 ? 0 : std::max<int64_t>(0, pos - widest + 1);
            const auto table = in.block_table(in.sequence[t]);
            for (int64_t b = first / g_.kv_block_size; b <= pos / g_.kv_block_size; ++b) {
                if (table[static_cast<std::size_t>(b)] == kFreedBlock)
                    fail(nullptr, concat("token ", t, " at position ", pos,
                                         " would attend to freed block ", b, " of its table"));
            }
        }
    }

    // Carried rows: an f32 buffer's first rows, as many values as they hold, each buffer once.
    void carried() {
        for (const CarriedRows& c : g_.carried_in) {
            const BufferDecl& b = buffer(c.buffer, "a carried", nullptr);
            const auto at = static_cast<std::size_t>(c.buffer);
            if (b.type != DType::kF32 || c.rows < 0 || c.rows > b.rows ||
                c.values.size() != static_cast<std::size_t>(c.rows * b.width) ||
                written_rows_[at] > 0)
                fail(nullptr, concat("the rows carried into '", b.name, "' do not fit it"));
            written_rows_[at] = c.rows;
        }
    }

    void inputs() const {
        const BatchInputs& in = g_.in;
        const auto n = static_cast<std::size_t>(in.n_tokens());
        if (in.positions.size() != n || in.kv_slots.size() != n || in.sequence.size() != n)
            fail(nullptr, "per-token inputs of different lengths");
        if (g_.kv_block_size < 1) fail(nullptr, "no KV block size");
        if (in.table_begin.empty() || in.table_begin.front() != 0 ||
            in.table_begin.back() != static_cast<int32_t>(in.table_blocks.size()))
            fail(nullptr, "malformed block tables");
        const int64_t n_sequences = static_cast<int64_t>(in.table_begin.size()) - 1;
        for (std::size_t s = 0; s + 1 < in.table_begin.size(); ++s) {
            if (in.table_begin[s] > in.table_begin[s + 1]) fail(nullptr, "malformed block tables");
        }
        const int64_t n_blocks = n_slots_ / g_.kv_block_size;
        for (int32_t b : in.table_blocks) {
            if ((b < 0 && b != kFreedBlock) || b >= n_blocks)
                fail(nullptr, concat("block ", b, " is outside the cache of ", n_blocks));
        }
        for (std::size_t t = 0; t < n; ++t) {
            const int32_t id = in.tokens[t], pos = in.positions[t], seq = in.sequence[t];
            if (id < 0 || id >= n_vocab_)
                fail(nullptr, concat("token id ", id, " is out of range: the model has ", n_vocab_,
                                     " tokens"));
            if (seq < 0 || seq >= n_sequences)
                fail(nullptr, concat("token ", t, " names sequence ", seq));
            const auto table = in.block_table(seq);
            if (pos < 0 || pos / g_.kv_block_size >= static_cast<int64_t>(table.size()))
                fail(nullptr,
                     concat("position ", pos, " of token ", t, " is beyond its block table"));
            if (table[static_cast<std::size_t>(pos / g_.kv_block_size)] == kFreedBlock)
                fail(nullptr, concat("position ", pos, " of token ", t, " is in a freed block"));
            const int64_t slot = int64_t{table[static_cast<std::size_t>(pos / g_.kv_block_size)]} *
                                     g_.kv_block_size +
                                 pos % g_.kv_block_size;
            if (in.kv_slots[t] != slot)
                fail(nullptr, concat("token ", t, " stores at slot ", in.kv_slots[t],
                                     " but its block table puts position ", pos, " at ", slot));
        }
        int64_t previous = -1;
        for (int32_t row : in.output_rows) {
            if (row <= previous || row >= in.n_tokens())
                fail(nullptr, concat("output row ", row, " is not an ascending batch row"));
            previous = row;
        }
    }

    const Graph& g_;
    int64_t n_vocab_;
    int64_t n_slots_;
    std::vector<int64_t> written_rows_;  // per buffer: the rows the ops so far wrote
    std::vector<const Op*> writer_;      // per buffer: the op that wrote it last
};

}  // namespace

void Graph::validate(int64_t n_vocab, int64_t kv_slots_in_cache) const {
    Validator(*this, n_vocab, kv_slots_in_cache).run();
}

std::string Graph::to_string() const {
    std::string out = concat("graph: ", ops.size(), " ops, ", in.n_tokens(), " tokens, ",
                             in.n_outputs(), " outputs, ", in.table_begin.size() - 1,
                             " sequence(s), KV blocks of ", kv_block_size, "\nbuffers:");
    for (const BufferDecl& b : buffers) out += concat(" ", b.name, "[", b.rows, ", ", b.width, "]");
    out += "\n";
    const auto name = [&](BufferId id) -> std::string {
        if (id == kNoBuffer) return "-";
        const BufferDecl& b = buffers[static_cast<std::size_t>(id)];
        return b.type == DType::kF32 ? b.name : concat(b.name, ":", dtype_name(b.type));
    };
    char line[320];
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        const OpDef& def = op_def(op.type);
        std::string inputs;
        for (int k = 0; k < 3; ++k) {
            const Access access = def.operand(k).access;
            if (access != Access::kRead && access != Access::kReadWrite) continue;
            inputs += (inputs.empty() ? "" : ",") + name(operand_buffer(op, k));
        }
        if (inputs.empty()) inputs = "-";
        const std::string weight =
            op.weight != nullptr && *op.weight ? op.weight->describe() : std::string();
        std::snprintf(line, sizeof(line),
                      "%4zu  %-22s %-14s %-10s <- %-12s %-24s [%lld, %lld]  %s\n", i,
                      op_name(op).c_str(), def.name, name(op.dst).c_str(), inputs.c_str(),
                      weight.c_str(), static_cast<long long>(op.rows),
                      static_cast<long long>(op.width), def.params(op).c_str());
        out += line;
    }
    return out;
}

}  // namespace minfer
