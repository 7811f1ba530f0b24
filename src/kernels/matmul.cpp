// matmul's driver: validates the call, converts the activations, splits the work over the
// thread pool and picks the kernel (scalar reference, SIMD GEMV, or panel GEMM).

#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "kernels/activation_quant.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"
#include "quant/dequantize.h"

namespace minfer {
namespace {

using kernels::Activations;

constexpr std::size_t align64(std::size_t n) {
    return (n + 63) & ~std::size_t{63};
}

// Groups of interleaved weights decoded into panels at a time for many tokens (run_packed): two,
// which the AVX-512 GEMM multiplies together (gemm_int_panels_simd).
constexpr int kPackedPanelsAtOnce = 2;

bool is_float_weight(GgmlType type) {
    return type == GgmlType::F32 || type == GgmlType::F16 || type == GgmlType::BF16;
}

void validate(const WeightMatrix& w, int64_t n_tokens) {
    if (!matmul_supports(w.type)) {
        throw UnsupportedError(
            concat("matmul does not support weights of type ", type_name(w.type)));
    }
    const int64_t block = block_size(w.type);
    if (w.n_cols <= 0 || w.n_rows <= 0 || w.n_cols % block != 0) {
        throw UsageError(concat("matmul: bad weight shape ", w.n_cols, " x ", w.n_rows,
                                " for type ", type_name(w.type),
                                " (row length must be a positive multiple of ", block, ")"));
    }
    if (w.n_cols > (int64_t{1} << 32) || w.n_rows > (int64_t{1} << 32)) {
        throw UsageError(
            concat("matmul: weight shape ", w.n_cols, " x ", w.n_rows, " is too large"));
    }
    // Divide rather than multiply: rows x row bytes may not fit in 64 bits.
    const std::size_t row_bytes = row_size(w.type, w.n_cols);
    if (w.data.size() / row_bytes < static_cast<std::size_t>(w.n_rows)) {
        throw UsageError(concat("matmul: weight data holds ", w.data.size(), " bytes, too few for ",
                                w.n_rows, " rows of ", w.n_cols, " ", type_name(w.type), " (",
                                row_bytes, " bytes each)"));
    }
    if (n_tokens < 0) throw UsageError(concat("matmul: negative token count ", n_tokens));
    if (!w.packed.empty()) {
        if (!kernels::has_packed_layout(w.type)) {
            throw UsageError(concat("matmul: weights of type ", type_name(w.type),
                                    " have no interleaved layout"));
        }
        if (reinterpret_cast<uintptr_t>(w.packed.data()) % 64 != 0) {
            throw UsageError("matmul: interleaved weights must start on a 64-byte boundary");
        }
        const std::size_t packed = kernels::packed_layout(w.type, w.n_cols, w.n_rows).bytes();
        if (w.packed.size() < packed) {
            throw UsageError(concat("matmul: interleaved weights hold ", w.packed.size(),
                                    " bytes, expected ", packed, " for ", w.n_rows, " rows of ",
                                    w.n_cols, " ", type_name(w.type)));
        }
    }
}

// Converts token rows [t_begin, t_end) of x to the activation type.
void convert_activations(GgmlType act_type, GgmlType weight_type, const float* x, int64_t n_cols,
                         int64_t t_begin, int64_t t_end, std::byte* out, std::size_t row_bytes) {
    const bool simd = kernel_path() == KernelPath::kBest;
    for (int64_t t = t_begin; t < t_end; ++t) {
        const float* src = x + t * n_cols;
        std::byte* dst = out + static_cast<std::size_t>(t) * row_bytes;
        if (weight_type == GgmlType::F16) {
            round_activations_f16(src, reinterpret_cast<float*>(dst), n_cols);
        } else if (weight_type == GgmlType::BF16) {
            round_activations_bf16(src, reinterpret_cast<float*>(dst), n_cols);
        } else if (simd) {
            kernels::quantize_activations_simd(act_type, src, dst, n_cols);
        } else if (act_type == GgmlType::Q8_0) {
            quantize_activations_q8_0(src, reinterpret_cast<block_q8_0*>(dst), n_cols);
        } else if (act_type == GgmlType::Q8_1) {
            quantize_activations_q8_1(src, reinterpret_cast<block_q8_1*>(dst), n_cols);
        } else {
            quantize_activations_q8_K(src, reinterpret_cast<block_q8_K*>(dst), n_cols);
        }
    }
}

// [begin, end) of `count` items for thread i of n, boundaries on multiples of `granule`.
std::pair<int64_t, int64_t> split(int64_t count, int i, int n, int64_t granule) {
    const int64_t units = (count + granule - 1) / granule;
    const int64_t begin = units * i / n * granule;
    const int64_t end = units * (i + 1) / n * granule;
    return {std::min(begin, count), std::min(end, count)};
}

}  // namespace

std::byte* MatmulScratch::reserve(std::size_t bytes) {
    const std::size_t lines = (bytes + sizeof(Line) - 1) / sizeof(Line);
    if (buffer_.size() < lines) {
        buffer_.clear();
        buffer_.resize(lines);
    }
    return reinterpret_cast<std::byte*>(buffer_.data());
}

bool matmul_supports(GgmlType type) {
    // Every weight type minfer reads; Q8_K is only an activation format.
    return can_dequantize(type) && type != GgmlType::Q8_K;
}

std::string matmul_kernel_name(GgmlType type, bool repacked) {
    if (kernel_path() == KernelPath::kScalar) return "scalar";
    const bool float_weights = is_float_weight(type);
    const std::string target = kernels::gemm_panel_kernel_name(float_weights);
    if (repacked && kernels::packed_kernels_available(type)) {
        return concat(target, float_weights ? " interleaved floats" : " interleaved");
    }
    return concat(target, float_weights ? " float panels" : " int8 panels");
}

MatmulJob::MatmulJob(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y,
                     int n_threads, MatmulMode mode)
    : w_((validate(w, n_tokens), w)),
      x_(x),
      y_(y),
      n_tokens_(n_tokens),
      n_threads_(n_threads),
      row_groups_((w.n_rows + kernels::kPanelRows - 1) / kernels::kPanelRows, n_threads) {
    float_weights_ = is_float_weight(w.type);
    // F16/BF16 activations are kept as rounded f32 values.
    act_type_ = float_weights_ ? GgmlType::F32 : activation_type(w.type);
    act_row_ = kernels::activation_row_bytes(act_type_, w.n_cols);
    // The scalar reference computes each output on its own (one dot_row_scalar per row and
    // token), so it is batch-invariant as it is.
    scalar_ = kernel_path() == KernelPath::kScalar;
    // One token takes the GEMV kernels (memory-bound, no unpacking) unless the batch-invariant
    // mode asks for the GEMM's arithmetic. Two tokens or more take the GEMM, which reads each
    // weight once for all of them: below 16 tokens a chunk of columns at a time (next comment),
    // 2.4x faster than repeated GEMV for 8 tokens on Qwen2 0.5B's FFN matrix (896 x 4864 Q4_0,
    // 2 threads), so that 8 sequences decoding together cost a fraction of 8 decoding apart.
    // Where the target has no GEMV kernels at all (aarch64, whose dot products are in the panel
    // kernels), one token takes the GEMM too: its panels of a chunk of columns stay in L1.
    constexpr int64_t kGemmMinTokens = 16;
    gemm_ = !scalar_ && (mode == MatmulMode::kBatchInvariant || n_tokens > 1 ||
                         !kernels::gemv_simd_available(w.type));
    // Interleaved weights need no unpacking for few tokens: in either mode they take the
    // GEMM's arithmetic (the kernels multiply as they decode); from kPackedPanelMinTokens on,
    // each group is decoded once into a panel that every token reuses.
    constexpr int64_t kPackedPanelMinTokens = 32;
    packed_ = !w.packed.empty() && !scalar_ && kernels::packed_kernels_available(w.type);
    if (packed_) gemm_ = true;
    packed_panels_ = packed_ && n_tokens >= kPackedPanelMinTokens;
    // Below 16 tokens the panels are unpacked a chunk of columns at a time, each chunk multiplied
    // while it is in L1 (a 16-row panel of 4864 Q4_0 columns is 78 KiB, more than L1's 32 KiB):
    // 16 x 1024 quant bytes, or 16 x 256 floats.
    const int64_t block = block_size(w.type);
    const int64_t chunk_values = float_weights_ ? 256 : 1024;
    chunk_cols_ = gemm_ && !packed_ && n_tokens < kGemmMinTokens
                      ? std::min(w.n_cols, std::max(block, chunk_values / block * block))
                      : w.n_cols;
    copy_x_ = w.type != GgmlType::F32;
    // Phase 1 hands out pieces of groups of 16 rows that hold about kPieceBytes of weights: a few
    // microseconds each, so that taking one costs little and the last ones even out the threads'
    // speeds. Interleaved weights are handed out in whole bands instead (packed_layout.h: a
    // band is one sequential run of bytes).
    constexpr int64_t kPieceBytes = 64 * 1024;
    if (packed_) {
        row_groups_ =
            WorkRanges(kernels::packed_layout(w.type, w.n_cols, w.n_rows).n_bands(), n_threads);
    } else {
        const auto row_bytes = static_cast<int64_t>(row_size(w.type, w.n_cols));
        piece_ = std::max<int64_t>(1, kPieceBytes / (row_bytes * kernels::kPanelRows));
    }
    const auto tokens = static_cast<std::size_t>(n_tokens);
    act_bytes_ = copy_x_ ? align64(tokens * act_row_) : 0;
    int_act_bytes_ = gemm_ && !float_weights_
                         ? align64(kernels::int_activations_bytes(w.type, w.n_cols, n_tokens))
                         : 0;
    panel_bytes_ = !gemm_ || (packed_ && !packed_panels_) ? 0
                   : float_weights_                       ? kernels::float_panel_bytes(chunk_cols_)
                                    : align64(kernels::int_panel_bytes(w.type, chunk_cols_));
    // Interleaved integer weights are decoded two groups at a time, for the GEMM to multiply
    // both panels together (run_packed).
    if (packed_panels_ && !float_weights_) panel_bytes_ *= kPackedPanelsAtOnce;
}

std::size_t MatmulJob::scratch_bytes() const {
    return act_bytes_ + int_act_bytes_ + panel_bytes_ * static_cast<std::size_t>(n_threads_);
}

void MatmulJob::bind(std::byte* scratch) {
    act_data_ = copy_x_ ? scratch : reinterpret_cast<std::byte*>(const_cast<float*>(x_));
    int_act_data_ = scratch + act_bytes_;
    panels_ = int_act_data_ + int_act_bytes_;
}

bool MatmulJob::can_share_activations(const MatmulJob& other) const {
    return other.x_ == x_ && other.n_tokens_ == n_tokens_ && other.w_.n_cols == w_.n_cols &&
           other.w_.type == w_.type && other.gemm_ == gemm_ && other.n_threads_ == n_threads_ &&
           other.chunk_cols_ == chunk_cols_ && other.packed_ == packed_ &&
           other.packed_panels_ == packed_panels_;
}

void MatmulJob::share_activations_of(const MatmulJob& other) {
    // Same type, width and tokens: the same layout, so the same scratch offsets.
    act_data_ = other.act_data_;
    int_act_data_ = other.int_act_data_;
    panels_ = other.panels_;
    activations_shared_ = true;
}

bool MatmulJob::converts_serially() const {
    return n_tokens_ == 1;
}

void MatmulJob::run_phase(int phase, int i, int n) const {
    if (n_tokens_ == 0) return;
    const Activations act{act_type_, act_data_, act_row_, n_tokens_};
    if (phase == 0) {
        if (activations_shared_) return;
        // One token is converted by thread 0 alone (waking the others costs more).
        if (converts_serially() && i != 0) return;
        const auto [t0, t1] =
            converts_serially() ? std::pair<int64_t, int64_t>{0, 1} : split(n_tokens_, i, n, 1);
        if (t0 >= t1) return;
        if (copy_x_)
            convert_activations(act_type_, w_.type, x_, w_.n_cols, t0, t1, act_data_, act_row_);
        if (gemm_ && !float_weights_)
            kernels::fill_int_activations(w_.type, act, w_.n_cols, t0, t1, int_act_data_);
        return;
    }
    if (packed_) {
        run_packed(i);
        return;
    }
    if (!gemm_) {
        row_groups_.run(i, piece_, [&](int64_t g0, int64_t g1) {
            const int64_t r0 = g0 * kernels::kPanelRows;
            const int64_t r1 = std::min(w_.n_rows, g1 * kernels::kPanelRows);
            if (scalar_ || !kernels::gemv_rows_simd(w_, act, r0, r1, y_)) {
                kernels::matmul_rows_scalar(w_, act, r0, r1, y_, w_.n_rows);
            }
        });
        return;
    }
    std::byte* panel_memory = panels_ + panel_bytes_ * static_cast<std::size_t>(i);
    row_groups_.run(i, piece_, [&](int64_t p0, int64_t p1) { run_panels(p0, p1, panel_memory); });
}

void MatmulJob::run_panels(int64_t p0, int64_t p1, std::byte* panel_memory) const {
    const kernels::IntActivations ia =
        float_weights_ ? kernels::IntActivations{}
                       : kernels::int_activations_at(int_act_data_, w_.type, w_.n_cols, n_tokens_);
    const auto* xf = reinterpret_cast<const float*>(act_data_);
    const int64_t block = block_size(w_.type);
    const auto row_bytes = static_cast<int64_t>(row_size(w_.type, w_.n_cols));
    const auto chunk_bytes = static_cast<int64_t>(row_size(w_.type, chunk_cols_));
    // Few tokens spend little time per panel, so the unpacking prefetches the next panel or chunk
    // (a panel of 16 x 896 Q4_0 values takes about 1 us); many tokens leave it in memory too long.
    const bool prefetch = chunk_cols_ < w_.n_cols || n_tokens_ < 16;
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t row0 = p * kernels::kPanelRows;
        const int valid =
            static_cast<int>(std::min<int64_t>(kernels::kPanelRows, w_.n_rows - row0));
        // Chunks of columns in order; each continues the sums of the previous ones in y.
        for (int64_t c0 = 0; c0 < w_.n_cols; c0 += chunk_cols_) {
            const int64_t cols = std::min(chunk_cols_, w_.n_cols - c0);
            // Bytes from this chunk to the next: the next chunk of the row, else the first of the
            // next panel.
            int64_t next = 0;
            if (prefetch && c0 + chunk_cols_ < w_.n_cols) {
                next = chunk_bytes;
            } else if (prefetch && p + 1 < p1) {
                next =
                    kernels::kPanelRows * row_bytes - static_cast<int64_t>(row_size(w_.type, c0));
            }
            if (float_weights_) {
                auto* panel = reinterpret_cast<float*>(panel_memory);
                kernels::fill_float_panel(w_, row0, c0, cols, panel, next);
                kernels::gemm_float_panel_simd(panel, cols, xf + c0, w_.n_cols, n_tokens_,
                                               y_ + row0, w_.n_rows, valid, c0 > 0);
            } else if (n_tokens_ == 1 &&
                       kernels::gemv_panel_simd(w_, row0, c0 / block, cols / block, ia, y_ + row0,
                                                c0 > 0, next)) {
                continue;  // unpacked in registers
            } else {
                const kernels::IntPanel panel = kernels::int_panel_at(panel_memory, w_.type, cols);
                kernels::fill_int_panel(w_, row0, c0 / block, panel, next);
                kernels::gemm_int_panel_simd(panel, ia, c0 / block, n_tokens_, y_ + row0, w_.n_rows,
                                             valid, c0 > 0);
            }
        }
    }
}

void MatmulJob::run_packed(int i) const {
    const kernels::PackedLayout l = kernels::packed_layout(w_.type, w_.n_cols, w_.n_rows);
    // Band by band (each one sequential run of bytes), whatever range a thread took.
    const auto for_each_band = [&](auto&& fn) {
        row_groups_.run(i, 1, [&](int64_t b0, int64_t b1) {
            for (int64_t b = b0; b < b1; ++b) fn(l.band_begin(b), l.band_end(b));
        });
    };
    std::byte* panel_memory =
        packed_panels_ ? panels_ + panel_bytes_ * static_cast<std::size_t>(i) : nullptr;
    if (float_weights_) {
        for_each_band([&](int64_t g0, int64_t g1) {
            kernels::packed_float_matmul_simd(w_, g0, g1, reinterpret_cast<const float*>(act_data_),
                                              n_tokens_, y_,
                                              reinterpret_cast<float*>(panel_memory));
        });
        return;
    }
    const kernels::IntActivations ia =
        kernels::int_activations_at(int_act_data_, w_.type, w_.n_cols, n_tokens_);
    if (!packed_panels_) {
        for_each_band([&](int64_t g0, int64_t g1) {
            kernels::packed_matmul_simd(w_, g0, g1, ia, n_tokens_, y_);
        });
        return;
    }
    // Two groups at a time (one at the end of an odd band), each decoded into its panel.
    kernels::IntPanel panels[kPackedPanelsAtOnce];
    for (int k = 0; k < kPackedPanelsAtOnce; ++k) {
        panels[k] = kernels::int_panel_at(panel_memory + panel_bytes_ / kPackedPanelsAtOnce * k,
                                          w_.type, w_.n_cols);
    }
    for_each_band([&](int64_t g0, int64_t g1) {
        for (int64_t g = g0; g < g1; g += kPackedPanelsAtOnce) {
            const int n = static_cast<int>(std::min<int64_t>(kPackedPanelsAtOnce, g1 - g));
            const int64_t row0 = g * kernels::kPackedRows;
            const int valid =
                static_cast<int>(std::min<int64_t>(n * kernels::kPackedRows, w_.n_rows - row0));
            for (int k = 0; k < n; ++k) kernels::fill_int_panel_packed_simd(w_, g + k, panels[k]);
            kernels::gemm_int_panels_simd(panels, n, ia, 0, n_tokens_, y_ + row0, w_.n_rows, valid,
                                          false);
        }
    });
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch, MatmulMode mode) {
    MatmulJob job(w, x, n_tokens, y, pool.size(), mode);
    if (n_tokens == 0) return;
    job.bind(scratch.reserve(job.scratch_bytes()));
    if (job.converts_serially()) {
        job.run_phase(0, 0, 1);
    } else {
        pool.run([&](int i, int n) { job.run_phase(0, i, n); });
    }
    pool.run([&](int i, int n) { job.run_phase(1, i, n); });
}

}  // namespace minfer
