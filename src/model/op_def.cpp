// The op table: see op_def.h. One entry per OpType, in its order (checked at compile time).

#include "model/op_def.h"

#include <cmath>
#include <iterator>

#include "core/error.h"

namespace minfer {
namespace {

constexpr OperandDef none{};
constexpr OperandDef read(const char* role, DType type = DType::kF32) {
    return {Access::kRead, role, type};
}
constexpr OperandDef write(const char* role, DType type = DType::kF32) {
    return {Access::kWrite, role, type};
}
constexpr OperandDef in_place(const char* role) {
    return {Access::kReadWrite, role, DType::kF32};
}

// Shapes: dst is [rows][width] for every op that has one; the inputs as each op says.
void same_as_dst(const Op& op, const GraphContext&, OperandShape out[3]) {
    out[0] = out[1] = {op.rows, op.width};
}
void dst_only(const Op& op, const GraphContext&, OperandShape out[3]) {
    out[0] = {op.rows, op.width};
}

std::string no_check(const Op&, const GraphContext&) {
    return "";
}
std::string no_params(const Op&) {
    return "";
}

// A vector of n f32 values (norm weights, biases, RoPE frequency factors).
std::string f32_vector(const Weight& w, int64_t n) {
    if (w.n_elements() != n) return concat("weight ", w.describe(), " should hold ", n, " values");
    if (w.type != GgmlType::F32) return concat("weight ", w.describe(), " must be f32");
    return "";
}

std::string attention_shape(const Op& op) {
    const AttentionParams& a = op.attn;
    if (a.n_head < 1 || a.n_head_kv < 1 || a.n_head % a.n_head_kv != 0 || a.head_dim_k < 1 ||
        a.head_dim_v < 1 || a.window < 0 || !(a.softcap >= 0.0f))
        return "bad attention shape";
    if (op.kv_layer < 0) return "names no cache layer";
    return "";
}

std::string expert_counts(const Op& op) {
    if (op.moe.n_expert < 1 || op.moe.n_used < 1 || op.moe.n_used > op.moe.n_expert)
        return concat("bad expert counts ", op.moe.n_used, " of ", op.moe.n_expert);
    return "";
}

// MoeRoute, MoeWeights: a value per expert used.
std::string one_per_expert_used(const Op& op, const GraphContext&) {
    std::string bad = expert_counts(op);
    if (bad.empty() && op.width != op.moe.n_used) bad = "width is not the experts used";
    return bad;
}

std::string expert_params(const Op& op) {
    return concat("experts=", op.moe.n_used, "/", op.moe.n_expert);
}

std::string factor_param(const Op& op) {
    return concat("factor=", op.factor);
}

constexpr OpDef kDefs[] = {
    {OpType::GetRows, "get_rows", write("output"), none, none, WeightUse::kRequired, dst_only,
     [](const Op& op, const GraphContext& g) -> std::string {
         if (op.weight->n_cols() != op.width) return "embedding width differs";
         if (op.weight->n_rows() < g.n_vocab) return "fewer embeddings than tokens";
         return "";
     },
     no_params},
    {OpType::RmsNorm, "rms_norm", write("output"), read("input"), none, WeightUse::kRequired,
     same_as_dst,
     [](const Op& op, const GraphContext&) { return f32_vector(*op.weight, op.width); },
     [](const Op& op) { return concat("eps=", op.eps); }},
    {OpType::MatMul, "matmul", write("output"), read("input"), none, WeightUse::kRequired,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         out[0] = {op.rows, op.width};
         out[1] = {op.rows, op.weight->n_cols()};
     },
     [](const Op& op, const GraphContext&) -> std::string {
         return op.weight->n_rows() != op.width ? "weight rows differ from width" : "";
     },
     no_params},
    {OpType::AddBias, "add_bias", in_place("output"), none, none, WeightUse::kRequired, dst_only,
     [](const Op& op, const GraphContext&) { return f32_vector(*op.weight, op.width); }, no_params},
    {OpType::HeadRmsNorm, "head_rms_norm", in_place("heads"), none, none, WeightUse::kRequired,
     dst_only,
     [](const Op& op, const GraphContext&) -> std::string {
         if (op.head_dim < 1 || op.width % op.head_dim != 0) return "bad head size";
         return f32_vector(*op.weight, op.head_dim);
     },
     [](const Op& op) { return concat("head_dim=", op.head_dim, " eps=", op.eps); }},
    {OpType::Rope, "rope", in_place("heads"), none, none, WeightUse::kOptional, dst_only,
     [](const Op& op, const GraphContext&) -> std::string {
         const RopeParams& r = op.rope;
         if (op.head_dim < 1 || op.width % op.head_dim != 0 || r.n_dims < 2 ||
             r.n_dims > op.head_dim || r.n_dims % 2 != 0)
             return "bad RoPE dimensions";
         if (!(r.freq_base > 0.0f) || !(r.freq_scale > 0.0f) || !(r.attn_factor > 0.0f) ||
             !std::isfinite(r.attn_factor))
             return "bad RoPE frequencies";
         return op.weight != nullptr && *op.weight ? f32_vector(*op.weight, r.n_dims / 2) : "";
     },
     [](const Op& op) {
         const RopeParams& r = op.rope;
         return concat(r.style == RopeStyle::kNeox ? "neox" : "normal", " head_dim=", op.head_dim,
                       " n_dims=", r.n_dims, " base=", r.freq_base, " scale=", r.freq_scale,
                       r.attn_factor != 1.0f ? concat(" attn_factor=", r.attn_factor) : "",
                       op.weight != nullptr && *op.weight ? " freq_factors" : "");
     }},
    {OpType::StoreKv, "store_kv", none, read("K"), read("V"), WeightUse::kNone,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         out[1] = {op.rows, op.attn.n_head_kv * op.attn.head_dim_k};
         out[2] = {op.rows, op.attn.n_head_kv * op.attn.head_dim_v};
     },
     [](const Op& op, const GraphContext&) { return attention_shape(op); },
     [](const Op& op) {
         const AttentionParams& a = op.attn;
         return concat("kv_layer=", op.kv_layer, " kv_heads=", a.n_head_kv, " dk=", a.head_dim_k,
                       " dv=", a.head_dim_v);
     }},
    {OpType::Attention, "attention", write("output"), read("Q"), none, WeightUse::kNone,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         out[0] = {op.rows, op.width};
         out[1] = {op.rows, op.attn.n_head * op.attn.head_dim_k};
     },
     [](const Op& op, const GraphContext&) -> std::string {
         std::string bad = attention_shape(op);
         if (bad.empty() && op.width != op.attn.n_head * op.attn.head_dim_v)
             bad = "output width differs";
         return bad;
     },
     [](const Op& op) {
         const AttentionParams& a = op.attn;
         return concat("kv_layer=", op.kv_layer, " heads=", a.n_head, "/", a.n_head_kv,
                       " dk=", a.head_dim_k, " dv=", a.head_dim_v, " scale=", a.scale,
                       a.softcap > 0 ? concat(" softcap=", a.softcap) : "",
                       a.window > 0 ? concat(" window=", a.window) : "");
     }},
    {OpType::SwiGlu, "swiglu", in_place("gate"), read("up"), none, WeightUse::kNone, same_as_dst,
     no_check, no_params},
    {OpType::GeGlu, "geglu", in_place("gate"), read("up"), none, WeightUse::kNone, same_as_dst,
     no_check, no_params},
    {OpType::Add, "add", in_place("sum"), read("addend"), none, WeightUse::kNone, same_as_dst,
     no_check, no_params},
    {OpType::SelectRows, "select_rows", write("output"), read("input"), none, WeightUse::kNone,
     [](const Op& op, const GraphContext& g, OperandShape out[3]) {
         out[0] = {op.rows, op.width};
         out[1] = {g.n_tokens, op.width};
     },
     [](const Op& op, const GraphContext& g) -> std::string {
         return op.rows != g.n_outputs ? "rows differ from the outputs" : "";
     },
     no_params},
    {OpType::Scale, "scale", in_place("values"), none, none, WeightUse::kNone, dst_only,
     [](const Op& op, const GraphContext&) -> std::string {
         return std::isfinite(op.factor) ? "" : "bad factor";
     },
     factor_param},
    {OpType::SoftCap, "softcap", in_place("values"), none, none, WeightUse::kNone, dst_only,
     [](const Op& op, const GraphContext&) -> std::string {
         return op.factor > 0.0f && std::isfinite(op.factor) ? "" : "bad soft cap";
     },
     factor_param},
    {OpType::MoeRoute, "moe_route", write("expert ids", DType::kI32), read("router logits"), none,
     WeightUse::kNone,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         out[0] = {op.rows, op.width};
         out[1] = {op.rows, op.moe.n_expert};
     },
     one_per_expert_used, expert_params},
    {OpType::MoeWeights, "moe_weights", write("expert weights"), read("router logits"),
     read("expert ids", DType::kI32), WeightUse::kNone,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         out[0] = out[2] = {op.rows, op.moe.n_used};
         out[1] = {op.rows, op.moe.n_expert};
     },
     one_per_expert_used, expert_params},
    {OpType::MoeMatMul, "moe_matmul", write("expert outputs"), read("input"),
     read("expert ids", DType::kI32), WeightUse::kRequired,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         const int64_t n_in = op.weight->ne[0];
         out[0] = {op.rows, op.width};
         out[1] = {op.rows, op.moe.per_slot_input ? op.moe.n_used * n_in : n_in};
         out[2] = {op.rows, op.moe.n_used};
     },
     [](const Op& op, const GraphContext&) -> std::string {
         std::string bad = expert_counts(op);
         if (!bad.empty()) return bad;
         const Weight& w = *op.weight;
         if (w.n_dims != 3 || w.ne[2] != op.moe.n_expert)
             return concat("weight ", w.describe(), " is not a 3-D tensor of ", op.moe.n_expert,
                           " experts");
         if (w.ne[1] * op.moe.n_used != op.width) return "width differs from the experts'";
         return "";
     },
     [](const Op& op) {
         return concat(expert_params(op), op.moe.per_slot_input ? " per_slot" : "");
     }},
    {OpType::MoeCombine, "moe_combine", write("output"), read("expert outputs"),
     read("expert weights"), WeightUse::kNone,
     [](const Op& op, const GraphContext&, OperandShape out[3]) {
         out[0] = {op.rows, op.width};
         out[1] = {op.rows, op.moe.n_used * op.width};
         out[2] = {op.rows, op.moe.n_used};
     },
     [](const Op& op, const GraphContext&) { return expert_counts(op); }, expert_params},
};

constexpr bool in_enum_order() {
    for (std::size_t i = 0; i < std::size(kDefs); ++i) {
        if (static_cast<std::size_t>(kDefs[i].type) != i) return false;
    }
    return true;
}
static_assert(std::size(kDefs) == kOpTypeCount && in_enum_order(),
              "kDefs must list every op type, in OpType's order");

}  // namespace

const OpDef& op_def(OpType type) {
    return kDefs[static_cast<std::size_t>(type)];
}

std::span<const OpDef> op_defs() {
    return kDefs;
}

const char* op_type_name(OpType t) {
    return static_cast<int>(t) < kOpTypeCount ? op_def(t).name : "?";
}

BufferId operand_buffer(const Op& op, int i) {
    return i == 0 ? op.dst : i == 1 ? op.src0 : op.src1;
}

}  // namespace minfer
