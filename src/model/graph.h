#pragma once
// The forward pass as data: an ordered list of operations over named activation buffers and the
// model's weights. Architectures record it (decoder_graph.cpp); a backend executes it in one go
// (cpu_backend.cpp now, a GPU backend later, without a host round trip per operation). Printing
// it is --dump-graph; timing each op is MINFER_TRACE=1.

#include <cstdint>
#include <string>
#include <vector>

#include "model/weights.h"

namespace minfer {

// Activation buffers, each [rows][width] f32, allocated once per context for the largest batch.
enum class Buf : uint8_t {
    Residual,   // [n_tokens, n_embd]    the residual stream
    Normed,     // [n_tokens, n_embd]    normalized input of a projection
    Q,          // [n_tokens, q_width]
    K,          // [n_tokens, kv_width]
    V,          // [n_tokens, v_width]
    AttnOut,    // [n_tokens, attn_out_width]
    Projected,  // [n_tokens, n_embd]    a block's output before the residual add; selected rows
    FfnGate,    // [n_tokens, n_ff]
    FfnUp,      // [n_tokens, n_ff]
    Logits,     // [n_outputs, n_vocab]
    None,
};
inline constexpr int kBufCount = static_cast<int>(Buf::None);
const char* buf_name(Buf b);

enum class OpType : uint8_t {
    GetRows,      // dst[t] = embedding row of token t (dequantized)
    RmsNorm,      // dst = rms_norm(src) * weight, row by row
    MatMul,       // dst = src · weight^T   (weight [width_in -> width])
    AddBias,      // dst += weight, broadcast over rows
    HeadRmsNorm,  // per head of dst (width / head_dim heads): rms_norm(head) * weight
    Rope,         // rotate the first n_rot dims of every head of dst by its token's position
    StoreKv,      // write K and V rows into the KV cache of `layer` at the tokens' positions
    Attention,    // dst = softmax(Q·K^T·scale + causal mask)·V over the cache of `layer`
    SwiGlu,       // dst = silu(dst) * src  (dst = gate, src = up)
    Add,          // dst += src
    SelectRows,   // dst[i] = src[output_rows[i]]: keep the rows whose logits are wanted
};
const char* op_type_name(OpType t);

struct Op {
    OpType type;
    const char* label;  // what the op computes: "attn_q", "ffn_down", ...
    int layer = -1;     // -1 outside the blocks
    Buf dst = Buf::None;
    Buf src = Buf::None;
    const Weight* weight = nullptr;
    int64_t rows = 0;      // rows of dst processed
    int64_t width = 0;     // width of a dst row
    int64_t head_dim = 0;  // HeadRmsNorm, Rope, Attention
};

struct Graph {
    std::vector<Op> ops;
    int64_t n_tokens = 0;              // rows of this micro-batch
    int64_t n_outputs = 0;             // rows whose logits are computed
    std::vector<int32_t> tokens;       // [n_tokens]
    std::vector<int32_t> positions;    // [n_tokens]
    std::vector<int32_t> output_rows;  // [n_outputs], indices into the batch, ascending

    // One line per op: index, name, type, weight type and shape, output shape.
    std::string to_string() const;
};

}  // namespace minfer
