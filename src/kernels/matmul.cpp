// matmul's driver: validates the call, converts the activations, splits the work over the
// thread pool and picks the kernel (scalar reference, SIMD GEMV, or panel GEMM).

#include "kernels/matmul.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/activation_quant.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_simd.h"

namespace minfer {
namespace {

using kernels::Activations;

constexpr std::size_t align64(std::size_t n) {
    return (n + 63) & ~std::size_t{63};
}

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
    switch (type) {
        case GgmlType::F32:
        case GgmlType::F16:
        case GgmlType::BF16:
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q5_1:
        case GgmlType::Q8_0:
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K:
        case GgmlType::IQ4_NL:
        case GgmlType::IQ4_XS:
        case GgmlType::TQ1_0:
        case GgmlType::TQ2_0:
            return true;
        default:
            return false;
    }
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
    validate(w, n_tokens);
    if (n_tokens == 0) return;

    const GgmlType weight_act = activation_type(w.type);
    const bool float_weights = is_float_weight(w.type);
    // F16/BF16 activations are kept as rounded f32 values.
    const GgmlType act_type = float_weights ? GgmlType::F32 : weight_act;
    const std::size_t act_row = kernels::activation_row_bytes(act_type, w.n_cols);
    const bool scalar = kernel_path() == KernelPath::kScalar;
    // Below 16 tokens repeated GEMV is cheaper when a SIMD GEMV kernel exists: the panels are
    // unpacked by scalar code, and unpacking a whole matrix costs about as much as 15 GEMV
    // passes over it (4096 x 4096 Q4_0), which only a larger batch amortizes.
    constexpr int64_t kGemmMinTokens = 16;
    const bool gemm = !scalar && n_tokens > 1 &&
                      (n_tokens >= kGemmMinTokens || !kernels::gemv_simd_handles(w.type));
    const int n_threads = pool.size();
    const auto tokens = static_cast<std::size_t>(n_tokens);

    // Scratch: activation rows | integer GEMM activations | one panel per thread.
    const bool copy_x = w.type != GgmlType::F32;
    const std::size_t act_bytes = copy_x ? align64(tokens * act_row) : 0;
    const std::size_t int_act_bytes =
        gemm && !float_weights ? align64(kernels::int_activations_bytes(w.type, w.n_cols, n_tokens))
                               : 0;
    const std::size_t panel_bytes = !gemm ? 0
                                    : float_weights
                                        ? kernels::float_panel_bytes(w.n_cols)
                                        : align64(kernels::int_panel_bytes(w.type, w.n_cols));
    std::byte* base = scratch.reserve(act_bytes + int_act_bytes +
                                      panel_bytes * static_cast<std::size_t>(n_threads));
    std::byte* act_data = copy_x ? base : reinterpret_cast<std::byte*>(const_cast<float*>(x));
    std::byte* int_act_data = base + act_bytes;
    std::byte* panels = int_act_data + int_act_bytes;
    const Activations act{act_type, act_data, act_row, n_tokens};

    if (!gemm) {
        if (copy_x) {
            if (n_tokens == 1) {
                convert_activations(act_type, w.type, x, w.n_cols, 0, 1, act_data, act_row);
            } else {
                pool.run([&](int i, int n) {
                    const auto [t0, t1] = split(n_tokens, i, n, 1);
                    convert_activations(act_type, w.type, x, w.n_cols, t0, t1, act_data, act_row);
                });
            }
        }
        pool.run([&](int i, int n) {
            const auto [r0, r1] = split(w.n_rows, i, n, kernels::kPanelRows);
            if (r0 >= r1) return;
            if (scalar || !kernels::gemv_rows_simd(w, act, r0, r1, y)) {
                kernels::matmul_rows_scalar(w, act, r0, r1, y, w.n_rows);
            }
        });
        return;
    }

    pool.run([&](int i, int n) {
        const auto [t0, t1] = split(n_tokens, i, n, 1);
        if (copy_x) convert_activations(act_type, w.type, x, w.n_cols, t0, t1, act_data, act_row);
        if (!float_weights) {
            kernels::fill_int_activations(w.type, act, w.n_cols, t0, t1, int_act_data);
        }
    });
    const int64_t n_panels = (w.n_rows + kernels::kPanelRows - 1) / kernels::kPanelRows;
    pool.run([&](int i, int n) {
        std::byte* panel_memory = panels + panel_bytes * static_cast<std::size_t>(i);
        const auto [p0, p1] = split(n_panels, i, n, 1);
        for (int64_t p = p0; p < p1; ++p) {
            const int64_t row0 = p * kernels::kPanelRows;
            const int valid =
                static_cast<int>(std::min<int64_t>(kernels::kPanelRows, w.n_rows - row0));
            if (float_weights) {
                auto* panel = reinterpret_cast<float*>(panel_memory);
                kernels::fill_float_panel(w, row0, panel);
                kernels::gemm_float_panel_simd(panel, reinterpret_cast<const float*>(act_data),
                                               w.n_cols, n_tokens, y + row0, w.n_rows, valid);
            } else {
                const kernels::IntPanel panel =
                    kernels::int_panel_at(panel_memory, w.type, w.n_cols);
                kernels::fill_int_panel(w, row0, panel);
                const kernels::IntActivations ia =
                    kernels::int_activations_at(int_act_data, w.type, w.n_cols, n_tokens);
                kernels::gemm_int_panel_simd(panel, ia, n_tokens, y + row0, w.n_rows, valid);
            }
        }
    });
}

}  // namespace minfer
