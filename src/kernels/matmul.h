#pragma once
// Y = W · X for a weight matrix of any supported ggml type, straight out of its blocks.
//
// x is [n_tokens][n_cols] row-major f32, y is [n_tokens][n_rows]: y[t][r] = dot(W row r, x row t).
// As in ggml, x is first converted to W's activation type (Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1
// for Q4_1/Q5_1, Q8_K for the K-quants, IQ4_XS and the ternary types; rounded to f16 for F16
// weights and to bf16 for BF16), so that the result matches llama.cpp's up to summation order.
// One token takes the GEMV path (memory-bound: rows split across threads, each weight byte read
// once) where the CPU has GEMV kernels for the type (x86), the GEMM path elsewhere (aarch64, whose
// dot products live in the panel kernels); two tokens or more take the GEMM path (16 rows at a time unpacked into a panel that every
// token then reuses; below 16 tokens a chunk of columns at a time, so the panel stays in L1).
// MatmulMode::kBatchInvariant takes the GEMM path's arithmetic for one token too.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "core/work_ranges.h"
#include "gguf/ggml_type.h"

namespace minfer {

struct WeightMatrix {
    GgmlType type;
    int64_t n_cols;  // ne[0]: row length in elements, a multiple of the type's block size
    int64_t n_rows;  // ne[1]
    std::span<const std::byte> data;  // row r at r * row_size(type, n_cols)
    // The same matrix in the interleaved layout of kernels/packed_layout.h (built at load by the
    // CPU backend), or empty. Where the kernel path has kernels for it (packed_kernels_available
    // in kernels/matmul_simd.h), matmul reads these bytes instead of `data`, with the same results
    // bit for bit (see MatmulMode). Must start on a 64-byte boundary.
    std::span<const std::byte> packed = {};
};

// Working memory of matmul (quantized activations, per-thread weight panels). One per inference
// context: it grows to the largest call it has seen and is reused, never shrunk.
class MatmulScratch {
  public:
    // A 64-byte aligned region of at least `bytes` bytes; invalidates earlier regions.
    std::byte* reserve(std::size_t bytes);
    std::size_t capacity() const { return buffer_.size() * sizeof(Line); }

  private:
    struct alignas(64) Line {
        std::byte bytes[64];
    };
    std::vector<Line> buffer_;
};

// How matmul may order its floating-point operations.
enum class MatmulMode {
    // One token takes the GEMV kernels, more the GEMM. The integer parts of the dot products are
    // exact whatever the kernel, but GEMV and GEMM sum the float terms in different orders, so a
    // token's outputs may differ in the last bits depending on how many tokens share the call.
    // Which path is faster for one token depends on the CPU: on the Zen 4 machine GEMV was; on
    // the Xeon of 2026-12-01 the GEMM path decodes Qwen2 0.5B Q4_0 46 % faster (59.6 against 40.7
    // tokens/s, 2 threads; its Q8_0 GEMV reads 19 GB/s, the GEMM path 38 GB/s).
    kGemvForOneToken,
    // Every output y[t][r] is computed by the same sequence of floating-point operations whatever
    // n_tokens, the token's place in the batch and the thread count: the GEMM panel arithmetic
    // (per row and token, one accumulator updated block after block, in column order) for every
    // token count, so a token alone gives the same bits as beside 15 others, and a prompt the same
    // bits in one chunk or many. The bits still depend on the kernel path (Highway target, VNNI).
    // One token costs an unpacking of the weights into panels (a chunk of columns at a time, in
    // L1) that GEMV does not need. The engine's default.
    // Interleaved weights (WeightMatrix::packed) take the GEMM's arithmetic in both modes: their
    // one-token kernels decode without transposing, so that costs nothing there.
    kBatchInvariant,
};

// True if matmul handles weights of this type.
bool matmul_supports(GgmlType type);

// For benchmark records: the kernel the batch-invariant matmul (the engine's) runs for weights of
// `type` on this CPU now, with the interleaved copy where `repacked` and the path has kernels for
// it: "scalar", "AVX3 VNNI interleaved", "NEON DOTPROD (sdot) int8 panels", "AVX2 float panels".
std::string matmul_kernel_name(GgmlType type, bool repacked);

// Throws UnsupportedError for a type it does not handle and UsageError for inconsistent shapes
// (n_cols not a multiple of the block size, data shorter than n_rows rows, n_tokens < 0).
void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch, MatmulMode mode = MatmulMode::kGemvForOneToken);

// The same product as a job that the threads of an already running pool execute in two phases,
// with a barrier between them: phase 0 converts the activations (split by tokens), phase 1
// multiplies (split by rows or panels). A forward pass then needs one ThreadPool::run in all.
class MatmulJob {
  public:
    // Validates like matmul().
    MatmulJob(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, int n_threads,
              MatmulMode mode = MatmulMode::kGemvForOneToken);

    // 64-byte aligned working memory the job needs; bind() it before running.
    std::size_t scratch_bytes() const;
    void bind(std::byte* scratch);

    // Two jobs on the same input (Q, K and V; gate and up): the second can skip phase 0 when
    // bound to the same scratch right after the first ran.
    bool can_share_activations(const MatmulJob& other) const;
    void share_activations_of(const MatmulJob& other);
    // True after share_activations_of: phase 0 does nothing, and phase 1 reads only what the
    // other job's phase 0 wrote, so no barrier is needed between the two jobs' phases 1.
    bool shares_activations() const { return activations_shared_; }

    // True when phase 0 is so small that thread 0 does it alone.
    bool converts_serially() const;
    // Every thread i of n (the n_threads it was made for) calls this for phase 0, then (after a
    // barrier) for phase 1.
    void run_phase(int phase, int i, int n) const;

    // Ready to run again on the same (rewritten) input: the next forward pass of the same shape
    // reuses the job instead of making it anew (not during a run).
    void rearm() { row_groups_.reset(); }

  private:
    void run_packed(int i) const;  // phase 1 on interleaved weights
    // Phase 1 of the GEMM on the file's layout: panels [p0, p1), panel_memory the thread's own.
    void run_panels(int64_t p0, int64_t p1, std::byte* panel_memory) const;

    WeightMatrix w_;
    const float* x_;
    float* y_;
    int64_t n_tokens_;
    int n_threads_;
    GgmlType act_type_ = GgmlType::F32;
    std::size_t act_row_ = 0;
    bool float_weights_ = false, scalar_ = false, gemm_ = false, copy_x_ = false;
    // Interleaved weights; with packed_panels_ decoded into panels (many tokens), else
    // multiplied as decoded.
    bool packed_ = false, packed_panels_ = false;
    bool activations_shared_ = false;
    // GEMM panels hold chunk_cols_ columns at a time (all of them for 16 tokens or more).
    int64_t chunk_cols_ = 0;
    std::size_t act_bytes_ = 0, int_act_bytes_ = 0, panel_bytes_ = 0;
    std::byte* act_data_ = nullptr;
    std::byte* int_act_data_ = nullptr;
    std::byte* panels_ = nullptr;
    // Phase 1's groups of kPanelRows rows, balanced among the threads as they go, piece_ of
    // them at a time; with interleaved weights the layout's bands of groups, one at a time.
    mutable WorkRanges row_groups_;
    int64_t piece_ = 1;
};

}  // namespace minfer
