#include "model/graph.h"

#include <cstdio>

#include "core/error.h"

namespace minfer {

const char* buf_name(Buf b) {
    switch (b) {
        case Buf::Residual:
            return "residual";
        case Buf::Normed:
            return "normed";
        case Buf::Q:
            return "q";
        case Buf::K:
            return "k";
        case Buf::V:
            return "v";
        case Buf::AttnOut:
            return "attn_out";
        case Buf::Projected:
            return "projected";
        case Buf::FfnGate:
            return "ffn_gate";
        case Buf::FfnUp:
            return "ffn_up";
        case Buf::Logits:
            return "logits";
        case Buf::None:
            return "-";
    }
    return "?";
}

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
    }
    return "?";
}

std::string Graph::to_string() const {
    std::string out =
        concat("graph: ", ops.size(), " ops, ", n_tokens, " tokens, ", n_outputs, " outputs\n");
    char line[256];
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const Op& op = ops[i];
        const std::string name = op.layer >= 0 ? concat("blk.", op.layer, ".", op.label) : op.label;
        std::string weight = "";
        if (op.weight != nullptr && *op.weight) {
            weight = concat(type_name(op.weight->type()), " ", op.weight->info->shape_string());
        }
        std::snprintf(line, sizeof(line), "%4zu  %-22s %-14s %-10s <- %-10s %-22s [%lld, %lld]\n",
                      i, name.c_str(), op_type_name(op.type), buf_name(op.dst), buf_name(op.src),
                      weight.c_str(), static_cast<long long>(op.rows),
                      static_cast<long long>(op.width));
        out += line;
    }
    return out;
}

}  // namespace minfer
