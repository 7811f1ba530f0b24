#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/kernel_path.h"
#include "kernels/ops_simd.h"
#include "quant/dequantize.h"

namespace minfer {
namespace {

// ggml's tanh-approximated GELU in f32.
float gelu_f32(float x) {
    constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
    constexpr float kCoef = 0.044715f;
    return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoef * x * x)));
}

// gelu of every half, rounded to a half as ggml's table stores it, widened to f32 (exact) for the
// lookups, scalar and vector alike (256 KiB).
const std::vector<float>& gelu_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (uint32_t i = 0; i < 65536; ++i) {
            t[i] = f16_to_f32(f32_to_f16(gelu_f32(f16_to_f32(static_cast<uint16_t>(i)))));
        }
        return t;
    }();
    return table;
}

}  // namespace

void rms_norm(const float* x, const float* weight, float* y, int64_t n, float eps) {
    double sum = 0.0;
    if (kernel_path() == KernelPath::kBest) {
        sum = kernels::sum_of_squares_simd(x, n);
    } else {
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
    }
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    const float scale = 1.0f / std::sqrt(mean + eps);
    if (weight) {
        for (int64_t i = 0; i < n; ++i) y[i] = (x[i] * scale) * weight[i];
    } else {
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
    }
}

void rope(float* x, int64_t n_tokens, int64_t n_heads, std::span<const int32_t> positions,
          const RopeConfig& config) {
    const int64_t head_dim = config.head_dim;
    const int64_t n_dims = config.n_dims;
    if (head_dim <= 0 || n_dims <= 0 || n_dims > head_dim || n_dims % 2 != 0) {
        throw UsageError(concat("rope: rotated dimensions ", n_dims,
                                " must be even and within the head size ", head_dim));
    }
    if (static_cast<int64_t>(positions.size()) < n_tokens) {
        throw UsageError(
            concat("rope: ", positions.size(), " positions for ", n_tokens, " tokens"));
    }
    const float theta_scale = std::pow(config.freq_base, -2.0f / static_cast<float>(n_dims));
    const int64_t half = n_dims / 2;
    std::vector<float> cos_theta(static_cast<std::size_t>(half));
    std::vector<float> sin_theta(static_cast<std::size_t>(half));
    for (int64_t t = 0; t < n_tokens; ++t) {
        float theta = static_cast<float>(positions[static_cast<std::size_t>(t)]);
        for (int64_t i = 0; i < half; ++i) {
            const float factor = config.freq_factors ? config.freq_factors[i] : 1.0f;
            const float angle = config.freq_scale * (theta / factor);
            cos_theta[i] = std::cos(angle) * config.attn_factor;
            sin_theta[i] = std::sin(angle) * config.attn_factor;
            theta *= theta_scale;
        }
        for (int64_t h = 0; h < n_heads; ++h) {
            float* v = x + (t * n_heads + h) * head_dim;
            for (int64_t i = 0; i < half; ++i) {
                const int64_t a = config.style == RopeStyle::kNormal ? 2 * i : i;
                const int64_t b = config.style == RopeStyle::kNormal ? 2 * i + 1 : i + half;
                const float x0 = v[a];
                const float x1 = v[b];
                v[a] = x0 * cos_theta[i] - x1 * sin_theta[i];
                v[b] = x0 * sin_theta[i] + x1 * cos_theta[i];
            }
        }
    }
}

void softmax(float* x, int64_t n, float scale, const float* mask) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = x[i] * scale + (mask ? mask[i] : 0.0f);
        max = std::fmax(max, x[i]);
    }
    if (max == -INFINITY) {
        for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
        return;
    }
    double sum = 0.0;
    if (kernel_path() == KernelPath::kBest) {
        kernels::exp_shifted_simd(x, n, max);
    } else {
        for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - max);
    }
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

double logsumexp(const float* x, int64_t n) {
    if (kernel_path() == KernelPath::kBest) return kernels::logsumexp_simd(x, n);
    float max = -INFINITY;
    for (int64_t i = 0; i < n; ++i) max = std::fmax(max, x[i]);
    if (max == -INFINITY) return -INFINITY;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) - max);
    return static_cast<double>(max) + std::log(sum);
}

int64_t first_above(const float* x, int64_t n, float threshold) {
    if (kernel_path() == KernelPath::kBest) return kernels::first_above_simd(x, n, threshold);
    for (int64_t i = 0; i < n; ++i) {
        if (x[i] > threshold) return i;
    }
    return n;
}

void silu(const float* x, float* y, int64_t n) {
    if (kernel_path() == KernelPath::kBest) return kernels::silu_simd(x, y, n);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void soft_cap_row(float* x, int64_t n, float cap) {
    if (kernel_path() == KernelPath::kBest) return kernels::soft_cap_simd(x, n, cap);
    for (int64_t i = 0; i < n; ++i) x[i] = soft_cap(x[i], cap);
}

void gelu(const float* x, float* y, int64_t n) {
    const std::vector<float>& table = gelu_table();
    if (kernel_path() == KernelPath::kBest && kernels::gelu_table_simd(x, y, n, table.data())) {
        return;
    }
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        if (v <= -10.0f) {
            y[i] = 0.0f;
        } else if (v >= 10.0f) {
            y[i] = v;
        } else {
            y[i] = table[f32_to_f16(v)];
        }
    }
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
    if (kernel_path() == KernelPath::kBest) return kernels::swiglu_simd(gate, up, out, n);
    for (int64_t i = 0; i < n; ++i) {
        const float g = gate[i];
        out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
}

void add(const float* a, const float* b, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void mul(const float* a, const float* b, float* out, int64_t n) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}

void get_rows(const WeightMatrix& table, std::span<const int32_t> ids, float* out) {
    const int64_t block = block_size(table.type);
    if (table.n_cols <= 0 || block <= 0 || table.n_cols % block != 0 || table.n_rows <= 0) {
        throw UsageError(concat("get_rows: bad table shape ", table.n_cols, " x ", table.n_rows,
                                " for type ", type_name(table.type)));
    }
    const std::size_t row_bytes = row_size(table.type, table.n_cols);
    if (table.data.size() / row_bytes < static_cast<std::size_t>(table.n_rows)) {
        throw UsageError(concat("get_rows: table data holds ", table.data.size(),
                                " bytes, less than ", table.n_rows, " rows of ", row_bytes));
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const int32_t id = ids[i];
        if (id < 0 || id >= table.n_rows) {
            throw UsageError(
                concat("get_rows: row id ", id, " is outside the table's ", table.n_rows, " rows"));
        }
        const std::byte* row = table.data.data() + static_cast<std::size_t>(id) * row_bytes;
        float* dst = out + static_cast<int64_t>(i) * table.n_cols;
        if (table.type == GgmlType::F32) {
            std::memcpy(dst, row, row_bytes);
        } else {
            dequantize_row(table.type, row, dst, table.n_cols);
        }
    }
}

}  // namespace minfer
