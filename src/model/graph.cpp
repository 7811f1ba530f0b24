#include "model/graph.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace minfer {

const char* op_type_name(OpType t) {
    switch (t) {
        case OpType::GetRows:
            return "get_rows";
        case OpType::RmsNorm:
            return "rms_norm";
        case OpType::MatMul:
            return "matmul";
        case OpType::AddBias:
            return "add_bias";
        case OpType::HeadRmsNorm:
            return "head_rms_norm";
        case OpType::Rope:
            return "rope";
        case OpType::StoreKv:
            return "store_kv";
        case OpType::Attention:
            return "attention";
        case OpType::SwiGlu:
            return "swiglu";
        case OpType::Add:
            return "add";
        case OpType::SelectRows:
            return "select_rows";
        case OpType::GeGlu:
            return "geglu";
        case OpType::Scale:
            return "scale";
        case OpType::SoftCap:
            return "softcap";
        case OpType::MoeRoute:
            return "moe_route";
        case OpType::MoeMatMul:
            return "moe_matmul";
        case OpType::MoeCombine:
            return "moe_combine";
    }
    return "?";
}

BufferId GraphBuilder::buffer(const char* name, int64_t rows, int64_t width) {
    g_.buffers.push_back(BufferDecl{name, rows, width});
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

std::string op_name(const Op& op) {
    return op.layer >= 0 ? concat("blk.", op.layer, ".", op.label) : std::string(op.label);
}

class Validator {
  public:
    Validator(const Graph& g, int64_t n_vocab, int64_t n_slots)
        : g_(g), n_vocab_(n_vocab), n_slots_(n_slots) {}

    void run() {
        inputs();
        for (std::size_t i = 0; i < g_.ops.size(); ++i) {
            op(g_.ops[i]);
            if (g_.ops[i].type == OpType::MoeRoute) routes_.push_back(&g_.ops[i]);
        }
        if (g_.logits != kNoBuffer) buffer(g_.logits, "the logits", nullptr);
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

    // `id` holds at least `rows` rows of `width` values.
    void shaped(const Op& op, BufferId id, const char* role, int64_t rows, int64_t width) const {
        const BufferDecl& b = buffer(id, role, &op);
        if (b.width != width || b.rows < rows) {
            fail(&op, concat(role, " '", b.name, "' is [", b.rows, ", ", b.width, "], needs [",
                             rows, ", ", width, "]"));
        }
    }

    void weight(const Op& op, int64_t n_elements) const {
        if (op.weight == nullptr || !*op.weight) fail(&op, "has no weight");
        if (n_elements >= 0 && op.weight->n_elements() != n_elements)
            fail(&op,
                 concat("weight ", op.weight->describe(), " should hold ", n_elements, " values"));
    }

    // A vector of n f32 values (norm weights, biases, RoPE frequency factors).
    void f32_vector(const Op& op, int64_t n) const {
        weight(op, n);
        if (op.weight->type != GgmlType::F32)
            fail(&op, concat("weight ", op.weight->describe(), " must be f32"));
    }

    void op(const Op& op) const {
        if (op.rows < 0 || op.rows > g_.in.n_tokens() || op.width < 1)
            fail(&op, concat("bad shape [", op.rows, ", ", op.width, "]"));
        // StoreKv writes the cache, no buffer; every other op writes dst.
        if (op.type == OpType::StoreKv ? op.dst != kNoBuffer : true)
            shaped(op, op.dst, "output", op.rows, op.width);
        const AttentionParams& a = op.attn;
        switch (op.type) {
            case OpType::GetRows:
                weight(op, -1);
                if (op.weight->n_cols() != op.width) fail(&op, "embedding width differs");
                if (op.weight->n_rows() < n_vocab_) fail(&op, "fewer embeddings than tokens");
                return;
            case OpType::RmsNorm:
                f32_vector(op, op.width);
                shaped(op, op.src0, "input", op.rows, op.width);
                return;
            case OpType::MatMul:
                weight(op, -1);
                if (op.weight->n_rows() != op.width) fail(&op, "weight rows differ from width");
                shaped(op, op.src0, "input", op.rows, op.weight->n_cols());
                return;
            case OpType::AddBias:
                f32_vector(op, op.width);
                return;
            case OpType::HeadRmsNorm:
                if (op.head_dim < 1 || op.width % op.head_dim != 0) fail(&op, "bad head size");
                f32_vector(op, op.head_dim);
                return;
            case OpType::Rope:
                if (op.head_dim < 1 || op.width % op.head_dim != 0 || op.rope.n_dims < 2 ||
                    op.rope.n_dims > op.head_dim || op.rope.n_dims % 2 != 0)
                    fail(&op, "bad RoPE dimensions");
                if (!(op.rope.freq_base > 0.0f) || !(op.rope.freq_scale > 0.0f) ||
                    !(op.rope.attn_factor > 0.0f) || !std::isfinite(op.rope.attn_factor))
                    fail(&op, "bad RoPE frequencies");
                if (op.weight != nullptr && *op.weight) f32_vector(op, op.rope.n_dims / 2);
                return;
            case OpType::StoreKv:
                heads(op);
                shaped(op, op.src0, "K", op.rows, a.n_head_kv * a.head_dim_k);
                shaped(op, op.src1, "V", op.rows, a.n_head_kv * a.head_dim_v);
                return;
            case OpType::Attention:
                heads(op);
                if (op.width != a.n_head * a.head_dim_v) fail(&op, "output width differs");
                shaped(op, op.src0, "Q", op.rows, a.n_head * a.head_dim_k);
                return;
            case OpType::SwiGlu:
            case OpType::GeGlu:
            case OpType::Add:
                shaped(op, op.src0, "input", op.rows, op.width);
                return;
            case OpType::SelectRows:
                if (op.rows != g_.in.n_outputs()) fail(&op, "rows differ from the outputs");
                shaped(op, op.src0, "input", g_.in.n_tokens(), op.width);
                return;
            case OpType::Scale:
                if (!std::isfinite(op.factor)) fail(&op, "bad factor");
                return;
            case OpType::SoftCap:
                if (!(op.factor > 0.0f) || !std::isfinite(op.factor)) fail(&op, "bad soft cap");
                return;
            case OpType::MoeRoute:
                experts(op);
                if (op.width != 2 * op.moe.n_used) fail(&op, "width is not 2 x experts used");
                shaped(op, op.src0, "router logits", op.rows, op.moe.n_expert);
                return;
            case OpType::MoeMatMul: {
                experts(op);
                route_of(op);
                weight(op, -1);
                const Weight& w = *op.weight;
                if (w.n_dims != 3 || w.ne[2] != op.moe.n_expert)
                    fail(&op, concat("weight ", w.describe(), " is not a 3-D tensor of ",
                                     op.moe.n_expert, " experts"));
                if (w.ne[1] * op.moe.n_used != op.width)
                    fail(&op, "width differs from the experts'");
                shaped(op, op.src0, "input", op.rows,
                       op.moe.per_slot_input ? op.moe.n_used * w.ne[0] : w.ne[0]);
                return;
            }
            case OpType::MoeCombine:
                experts(op);
                route_of(op);
                shaped(op, op.src0, "expert outputs", op.rows, op.moe.n_used * op.width);
                return;
        }
        fail(&op, "unknown op type");
    }

    void experts(const Op& op) const {
        if (op.moe.n_expert < 1 || op.moe.n_used < 1 || op.moe.n_used > op.moe.n_expert)
            fail(&op, concat("bad expert counts ", op.moe.n_used, " of ", op.moe.n_expert));
    }

    // src1 must be what an earlier MoeRoute of the same experts wrote: its expert ids are then in
    // range, which the backends rely on.
    void route_of(const Op& op) const {
        for (const Op* r : routes_) {
            if (r->dst == op.src1 && r->moe.n_expert == op.moe.n_expert &&
                r->moe.n_used == op.moe.n_used && r->rows >= op.rows)
                return;
        }
        fail(&op, "its routing input is not the output of an earlier moe_route");
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

    void heads(const Op& op) const {
        const AttentionParams& a = op.attn;
        if (a.n_head < 1 || a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0 || a.head_dim_k < 1 ||
            a.head_dim_v < 1 || a.window < 0 || !(a.softcap >= 0.0f))
            fail(&op, "bad attention shape");
        if (op.kv_layer < 0) fail(&op, "names no cache layer");
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
    std::vector<const Op*> routes_;  // the MoeRoute ops validated so far
};

std::string params(const Op& op) {
    const AttentionParams& a = op.attn;
    switch (op.type) {
        case OpType::RmsNorm:
            return concat("eps=", op.eps);
        case OpType::HeadRmsNorm:
            return concat("head_dim=", op.head_dim, " eps=", op.eps);
        case OpType::Rope:
            return concat(
                op.rope.style == RopeStyle::kNeox ? "neox" : "normal", " head_dim=", op.head_dim,
                " n_dims=", op.rope.n_dims, " base=", op.rope.freq_base,
                " scale=", op.rope.freq_scale,
                op.rope.attn_factor != 1.0f ? concat(" attn_factor=", op.rope.attn_factor) : "",
                op.weight != nullptr && *op.weight ? " freq_factors" : "");
        case OpType::Scale:
        case OpType::SoftCap:
            return concat("factor=", op.factor);
        case OpType::MoeRoute:
        case OpType::MoeCombine:
            return concat("experts=", op.moe.n_used, "/", op.moe.n_expert);
        case OpType::MoeMatMul:
            return concat("experts=", op.moe.n_used, "/", op.moe.n_expert,
                          op.moe.per_slot_input ? " per_slot" : "");
        case OpType::StoreKv:
            return concat("kv_layer=", op.kv_layer, " kv_heads=", a.n_head_kv, " dk=", a.head_dim_k,
                          " dv=", a.head_dim_v);
        case OpType::Attention:
            return concat("kv_layer=", op.kv_layer, " heads=", a.n_head, "/", a.n_head_kv,
                          " dk=", a.head_dim_k, " dv=", a.head_dim_v, " scale=", a.scale,
                          a.softcap > 0 ? concat(" softcap=", a.softcap) : "",
                          a.window > 0 ? concat(" window=", a.window) : "");
        default:
            return "";
    }
}

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
        return id == kNoBuffer ? "-" : buffers[static_cast<std::size_t>(id)].name;
    };
    char line[320];
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        std::string inputs = name(op.src0);
        if (op.src1 != kNoBuffer) inputs += "," + name(op.src1);
        const std::string weight =
            op.weight != nullptr && *op.weight ? op.weight->describe() : std::string();
        std::snprintf(line, sizeof(line),
                      "%4zu  %-22s %-14s %-10s <- %-12s %-24s [%lld, %lld]  %s\n", i,
                      op_name(op).c_str(), op_type_name(op.type), name(op.dst).c_str(),
                      inputs.c_str(), weight.c_str(), static_cast<long long>(op.rows),
                      static_cast<long long>(op.width), params(op).c_str());
        out += line;
    }
    return out;
}

}  // namespace minfer
