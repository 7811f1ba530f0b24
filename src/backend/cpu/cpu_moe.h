#pragma once
// The mixture-of-experts ops of the CPU backend (model/graph.h: MoeRoute, MoeWeights, MoeMatMul,
// MoeCombine).
//
// MoeMatMul groups the batch's (token, slot) rows by expert: the rows routed to one expert are
// gathered into one contiguous block, and each expert that any row picked runs one MatmulJob
// (kernels/matmul.h) over its block. So an expert's weights are read once per step however many
// tokens of the batch chose it, and experts no token chose are not read at all: decoding one
// token reads k of the n_expert matrices. The jobs run side by side in the phases of one op:
//   prepare  (thread 0)    group the rows by expert, create and bind one job per used expert
//   gather   (all threads) copy the input rows into the expert-sorted block
//   convert  (all)         every job's phase 0 (one-token jobs spread over the threads)
//   multiply (all)         every job's phase 1, each split over the threads by weight rows
//   scatter  (all)         the expert-sorted outputs back to [token][slot] order
// with a barrier between phases (the caller's). One token (decoding) needs neither gather nor
// scatter: each job reads its slot's input and writes its slot's output in place, the
// experts of a shared input convert it once, and prepare converts: prepare, multiply.
// (Each barrier costs the second thread about a microsecond; decoding qwen3moe-16x768 crossed 15
// of them per layer.)
// Each expert's matrix is a 2-D slice of the op's 3-D weight; the jobs read its interleaved copy
// where the backend made one (packed_weights.h: every slice is packed on its own).

#include <cstdint>
#include <optional>
#include <vector>

#include "core/spin_barrier.h"
#include "kernels/matmul.h"
#include "model/graph.h"

namespace minfer {

class PackedWeights;

// The ids of the k experts of one token from its router logits [n_expert]: most probable first
// (softmax_like_ggml's probabilities, computed into probs [n_expert]), the lower id on a tie.
void moe_route_row(const float* logits, int64_t n_expert, int64_t k, float* probs, int32_t* ids);

// The weights [k] of the experts ids [k] of one token: their softmax probabilities (again into
// probs [n_expert], the same bits as moe_route_row's) renormalised to sum 1.
void moe_weights_row(const float* logits, int64_t n_expert, const int32_t* ids, int64_t k,
                     float* probs, float* weights);

// out[width] = sum over slots j in order of weights[j] * experts[j][width]; each product rounded
// to f32 before it is added, as ggml does.
void moe_combine_row(const float* experts, const float* weights, int64_t k, int64_t width,
                     float* out);

// Working memory the MoeMatMul ops of a backend share (they run one after another), kept and
// grown from graph to graph.
struct MoeWorkspace {
    struct Group {
        int64_t expert;
        int64_t first;  // its first row in the sorted blocks
        int64_t count;
    };
    std::vector<int64_t> sorted;  // [rows * k] token * k + slot, grouped by expert
    std::vector<Group> groups;    // the experts some row picked, ascending
    std::vector<float> x_sorted;  // [rows * k][n_in]
    std::vector<float> y_sorted;  // [rows * k][n_out]
    std::vector<MatmulJob> jobs;  // one per group
    MatmulScratch scratch;        // the jobs' (sized by prepare(), once the routing is known)
    uint64_t expert_bytes = 0;    // expert weights bound by prepare() since the last reset
};

// One MoeMatMul op on one graph's buffers.
class MoeMatmul {
  public:
    // Checks that the expert matrices suit the matmul kernels (throws like MatmulJob) and grows
    // the workspace's blocks for this op. x is src0, experts the MoeRoute output, y the op's dst;
    // packed holds the copies of the experts' slices (none: the file's layout), and outlives this.
    MoeMatmul(const Op& op, const float* x, const int32_t* experts, float* y, int n_threads,
              MatmulMode mode, MoeWorkspace& ws, const PackedWeights& packed);

    // Called by every thread i of n of the pool's run: the phases, `barrier` between each two.
    void run(int thread, int n, SpinBarrier& barrier);

  private:
    void prepare();                    // thread 0 only
    void gather(int thread, int n);    // every thread, after prepare; not in place
    void convert(int thread, int n);   // every thread, after gather; not in place
    void multiply(int thread, int n);  // every thread, after convert (in place: prepare)
    void scatter(int thread, int n);   // every thread, after multiply; not in place

    WeightMatrix expert(int64_t e) const;  // its copy attached, if it has one

    Weight weight_;
    MoeParams moe_;
    const float* x_;
    const int32_t* experts_;  // [rows][k]
    float* y_;
    int64_t rows_, n_in_, n_out_;  // tokens; one expert's input and output widths
    int n_threads_;
    MatmulMode mode_;
    MoeWorkspace* ws_;
    const PackedWeights* packed_;
    // One token's k distinct experts, none of whose inputs overlaps the outputs: each job reads
    // and writes its slot in place (set by prepare, read after its barrier).
    bool in_place_ = false;
};

}  // namespace minfer
