#pragma once
// One definition per graph op type (model/graph.h): its name, the buffers it reads, writes or
// updates in place and their value types, whether it reads a weight, the shapes its buffers must
// have given the op's own shape and parameters, the checks of its parameters, and how they print.
// Graph::validate and Graph::to_string read nothing else, and a backend reads the same table
// (which buffers an op reads before it runs, which it writes): adding a backend is writing one
// kernel per op type; adding an op type is one entry here, one line in OpType, and its kernels.

#include <cstdint>
#include <span>
#include <string>

#include "model/graph.h"

namespace minfer {

// What an op does with one of its buffer operands (dst, src0, src1).
enum class Access : uint8_t {
    kUnused,     // the op has no such operand (its BufferId must be kNoBuffer)
    kRead,       // read only
    kWrite,      // written without being read (every value of its rows)
    kReadWrite,  // read, then overwritten: the op works in place
};

struct OperandDef {
    Access access = Access::kUnused;
    const char* role = "";  // what it holds, for messages: "gate", "router logits", "K"
    DType type = DType::kF32;
};

enum class WeightUse : uint8_t { kNone, kOptional, kRequired };

// The shape an operand must have: at least `rows` rows of exactly `width` values.
struct OperandShape {
    int64_t rows = 0;
    int64_t width = 0;
};

// What an op's shapes depend on beside the op itself.
struct GraphContext {
    int64_t n_tokens = 0;
    int64_t n_outputs = 0;
    int64_t n_vocab = 0;
};

struct OpDef {
    OpType type;
    const char* name;  // "rms_norm": printouts, traces
    OperandDef dst, src0, src1;
    WeightUse weight = WeightUse::kNone;
    // The shapes of dst, src0 and src1 (indexed 0, 1, 2; unused ones ignored). Called only once
    // `check` has passed, so it may read the weight and divide by the op's parameters.
    void (*shapes)(const Op& op, const GraphContext& g, OperandShape out[3]) = nullptr;
    // The op's parameters and weight: "" when they are sound, else what is wrong ("bad RoPE
    // dimensions"). The weight's presence is checked before, from `weight`.
    std::string (*check)(const Op& op, const GraphContext& g) = nullptr;
    // Its parameters for a printout: "eps=1e-06" ("" for none).
    std::string (*params)(const Op& op) = nullptr;

    const OperandDef& operand(int i) const { return i == 0 ? dst : i == 1 ? src0 : src1; }
};

const OpDef& op_def(OpType type);
// Every definition, in OpType order.
std::span<const OpDef> op_defs();

// Operand i (0 dst, 1 src0, 2 src1) of an op.
BufferId operand_buffer(const Op& op, int i);

}  // namespace minfer
