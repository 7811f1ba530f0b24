#pragma once
// The forward pass of one batch as data: the activation buffers it needs (declared with their
// shapes), an ordered list of operations that name every input they read (buffers and weights)
// and carry every parameter they use (epsilon, scales, RoPE, attention shape and window), and the
// batch's inputs (tokens, positions, where each token's keys and values live in the paged KV
// cache). A backend executes exactly what the graph says and nothing else: the CPU backend
// (backend/cpu), the reference backend (backend/reference: plain loops in double, the oracle), a
// GPU backend. Every op type has one definition (model/op_def.h): its operands, which of them it
// reads, writes or updates in place and their types, its weight, how its shapes follow from its
// parameters, its checks and how it prints. Validation and printing read only those definitions;
// a backend adds nothing but a kernel per op type. Printing a graph is --dump-graph; timing each
// op is MINFER_TRACE.
//
// Numerics: the graph fixes what is computed, not how it rounds. The CPU backend rounds as ggml
// does, to give llama.cpp's answers: matmul inputs converted to the weight type's activation
// format (q8_0, q8_1, q8_K, f16 or bf16; kernels/matmul.h), K and V stored in the cache type,
// queries and attention weights rounded to f16 with an f16 cache (kernels/attention.h). A backend
// computing in f32 or f64 throughout (the tests' reference backend) agrees with it within the
// golden parity tolerance, and to about 2e-5 in log-probabilities on f32 weights and cache.
//
// The paged KV cache: a pool of blocks of kv_block_size positions; cache slot s is position
// s % kv_block_size of block s / kv_block_size. Each sequence's positions live in the blocks of
// its block table, in order: position p of a sequence is in block table[p / B] at offset p % B.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/layer_config.h"
#include "model/weights.h"

namespace minfer {

// An activation buffer: [rows][width] values of its type, row-major.
using BufferId = int16_t;
inline constexpr BufferId kNoBuffer = -1;

// The value type of an activation buffer: f32 activations, or i32 indices (the experts a router
// picked). Both are 4 bytes.
enum class DType : uint8_t { kF32, kI32 };
const char* dtype_name(DType type);

struct BufferDecl {
    const char* name;
    int64_t rows;
    int64_t width;
    DType type = DType::kF32;
};

// What each op computes. "dst (in place)" marks the ops that read their output buffer before they
// overwrite it; op_def.h says the same as data (Access::kReadWrite).
enum class OpType : uint8_t {
    GetRows,      // dst[t] = row tokens[t] of weight (the embedding table, dequantized)
    RmsNorm,      // dst = rms_norm(src0) * weight, row by row, with eps
    MatMul,       // dst = src0 · weight^T   (weight [width_in -> width])
    AddBias,      // dst (in place) += weight, broadcast over rows
    HeadRmsNorm,  // dst (in place): per head (width / head_dim heads), rms_norm(head, eps) * weight
    Rope,         // dst (in place): rotate the first rope.n_dims values of every head (head_dim)
                  // by the token's position; weight (optional) holds per-frequency divisors; the
                  // rotated pairs are multiplied by rope.attn_factor (LongRoPE's magnitude scale)
    StoreKv,      // cache layer kv_layer at slot kv_slots[t] = (src0 row t as K, src1 row t as V);
                  // no dst
    Attention,    // dst = softmax(scale * Q·K^T [softcapped]) · V over the keys each token sees
                  // (its sequence's positions max(0, pos - window + 1) .. pos) in cache layer
                  // kv_layer; src0 = Q [rows][n_head * head_dim_k]
    SwiGlu,       // dst (in place) = silu(dst) * src0  (dst = gate, src0 = up)
    GeGlu,        // dst (in place) = gelu_tanh(dst) * src0 (Gemma's feed-forward gate)
    Add,          // dst (in place) += src0
    SelectRows,   // dst[i] = src0[output_rows[i]]: keep the rows whose logits are wanted
    Scale,        // dst (in place) *= factor (Gemma's embedding scale; queries before attention)
    SoftCap,      // dst (in place) = factor * tanh(dst * (1 / factor)) (Gemma 2's final logits)
    // Mixture of experts, k = moe.n_used experts per token out of moe.n_expert:
    MoeRoute,    // dst i32 [rows][k]: from router logits src0 [rows][n_expert], the ids of the k
                 // most probable experts (softmax; most probable first, the lower id on a tie)
    MoeWeights,  // dst [rows][k]: the softmax probabilities (of src0, the router logits) of the
                 // experts src1 (a MoeRoute output) picked, divided by their sum
    MoeMatMul,   // dst [rows][k][width] : slot j of token t = x · expert(t, j)^T, weight a 3-D
                 // expert tensor [width_in, width, n_expert], src1 the MoeRoute output (i32); x
                 // is src0 row t [width_in] (the same for every slot), or its slot j
                 // [k][width_in] when moe.per_slot_input
    MoeCombine,  // dst [rows][width] = sum over slots j in order of weight(t, j) * src0[t][j]
                 // (src0 [rows][k][width], src1 the MoeWeights output [rows][k])
};
inline constexpr int kOpTypeCount = static_cast<int>(OpType::MoeCombine) + 1;
const char* op_type_name(OpType t);

struct AttentionParams {
    int64_t n_head = 0;
    int64_t n_head_kv = 0;
    int64_t head_dim_k = 0;
    int64_t head_dim_v = 0;
    float scale = 1.0f;    // multiplies Q·K
    float softcap = 0.0f;  // 0: none
    int64_t window = 0;    // 0: all earlier positions of the sequence

    // The first position a token at `pos` attends to: pos - window + 1 with a window, else 0.
    int64_t first_position(int64_t pos) const {
        return window > 0 && pos + 1 > window ? pos + 1 - window : 0;
    }
};

struct MoeParams {
    int64_t n_expert = 0;         // experts of the layer
    int64_t n_used = 0;           // k: experts per token
    bool per_slot_input = false;  // MoeMatMul: src0 holds one input row per slot
};

struct Op {
    OpType type;
    const char* label;  // what the op computes: "attn_q", "ffn_down", ...
    int layer = -1;     // -1 outside the blocks
    BufferId dst = kNoBuffer;
    BufferId src0 = kNoBuffer;
    BufferId src1 = kNoBuffer;
    const Weight* weight = nullptr;  // the weight input, if any (points into the model)
    int64_t rows = 0;                // rows of dst processed
    int64_t width = 0;               // width of a dst row
    // Parameters (each op uses the ones its comment above names).
    float eps = 0.0f;      // RmsNorm, HeadRmsNorm
    float factor = 0.0f;   // Scale, SoftCap
    int64_t head_dim = 0;  // HeadRmsNorm, Rope
    RopeParams rope;       // Rope
    AttentionParams attn;  // StoreKv (head counts and sizes), Attention
    int kv_layer = -1;     // StoreKv, Attention
    MoeParams moe;         // MoeRoute, MoeWeights, MoeMatMul, MoeCombine
};
// "blk.3.attn_q", "output": how messages and printouts name an op.
std::string op_name(const Op& op);

inline constexpr int32_t kFreedBlock = -1;

// Per token of the batch, and per sequence the batch touches.
struct BatchInputs {
    std::vector<int32_t> tokens;     // [n_tokens]
    std::vector<int32_t> positions;  // [n_tokens] position of each token in its sequence
    std::vector<int32_t> kv_slots;   // [n_tokens] the cache slot its K and V are stored at
    std::vector<int32_t> sequence;   // [n_tokens] index of its sequence's block table below
    // Block tables, flattened: sequence i's blocks are table_blocks[table_begin[i] ..
    // table_begin[i + 1]), covering at least positions 0 .. its largest position in the batch.
    // An entry kFreedBlock stands for a block the cache freed because no later position can see
    // it (every layer has a sliding window that ends after it); no attention reads it.
    std::vector<int32_t> table_begin;  // [n_sequences + 1]
    std::vector<int32_t> table_blocks;
    std::vector<int32_t> output_rows;  // [n_outputs] rows whose logits are wanted, ascending

    int64_t n_tokens() const { return static_cast<int64_t>(tokens.size()); }
    int64_t n_outputs() const { return static_cast<int64_t>(output_rows.size()); }
    std::span<const int32_t> block_table(int32_t seq) const {
        return std::span(table_blocks)
            .subspan(static_cast<std::size_t>(table_begin[static_cast<std::size_t>(seq)]),
                     static_cast<std::size_t>(table_begin[static_cast<std::size_t>(seq) + 1] -
                                              table_begin[static_cast<std::size_t>(seq)]));
    }
};

// Rows of an f32 activation buffer that the host supplies before the first op: a split forward
// pass's activations from the backend that ran the earlier layers (backend/split_backend.h).
struct CarriedRows {
    BufferId buffer = kNoBuffer;
    int64_t rows = 0;           // the first `rows` rows of the buffer
    std::vector<float> values;  // [rows][the buffer's width]
};

struct Graph {
    std::vector<BufferDecl> buffers;
    std::vector<Op> ops;
    BatchInputs in;
    int64_t kv_block_size = 0;    // positions per cache block
    BufferId logits = kNoBuffer;  // [n_outputs][n_vocab] after the last op
    std::vector<CarriedRows> carried_in;  // written before the first op (usually none)

    // Checks what a backend relies on: every op against its definition (op_def.h: buffer ids,
    // types and shapes, weights, parameters; every buffer it reads written by an earlier op or
    // carried in), token ids below n_vocab, positions, slots and tables consistent. Throws
    // UsageError naming the op or token. Backends call it before executing.
    void validate(int64_t n_vocab, int64_t kv_slots_in_cache) const;

    // One line per op: index, name, type, output <- inputs (an op updating its output in place
    // lists it among its inputs), weight type and shape, output shape, parameters.
    std::string to_string() const;
};

// Records ops into a graph: declares buffers by name, appends ops.
class GraphBuilder {
  public:
    explicit GraphBuilder(Graph& g) : g_(g) {}
    BufferId buffer(const char* name, int64_t rows, int64_t width, DType type = DType::kF32);
    Op& op(OpType type, const char* label, int layer, BufferId dst, int64_t rows, int64_t width);

  private:
    Graph& g_;
};

}  // namespace minfer
