// The portable scalar reference of matmul: one block at a time through UnpackedBlock, with
// ggml's order of operations (integer sums per block or sub-block, then float scales).

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "kernels/block_unpack.h"
#include "kernels/matmul_internal.h"
#include "quant/block_types.h"

namespace minfer::kernels {
namespace {

template <class Block>
const Block& block_at(const std::byte* p, int64_t index) {
    return reinterpret_cast<const Block*>(p)[index];
}

int32_t int_dot(const int8_t* a, const int8_t* b, int n) {
    int32_t sum = 0;
    for (int i = 0; i < n; ++i) sum += static_cast<int32_t>(a[i]) * b[i];
    return sum;
}

float dot_float_row(GgmlType type, const std::byte* w_row, const float* x, int64_t n) {
    double sum = 0.0;
    if (type == GgmlType::F32) {
        const auto* w = reinterpret_cast<const float*>(w_row);
        for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i] * x[i]);
    } else {
        const auto* w = reinterpret_cast<const uint16_t*>(w_row);
        const bool is_f16 = type == GgmlType::F16;
        for (int64_t i = 0; i < n; ++i) {
            const float wf = is_f16 ? f16_to_f32(w[i]) : bf16_to_f32(w[i]);
            sum += static_cast<double>(wf * x[i]);
        }
    }
    return static_cast<float>(sum);
}

// 32-value blocks against Q8_0 (or Q8_1, whose s = d * sum(q) carries the offset term).
float dot_row_q8_32(GgmlType type, const std::byte* w_row, const std::byte* act_row,
                    int64_t n_blocks, bool q8_1) {
    const std::size_t stride = type_size(type);
    UnpackedBlock block;
    float sum = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
        unpack_block(type, w_row + b * static_cast<int64_t>(stride), block);
        const int8_t* aq;
        float ad;
        float as = 0.0f;
        if (q8_1) {
            const auto& a = block_at<block_q8_1>(act_row, b);
            aq = a.qs;
            ad = f16_to_f32(a.d);
            as = f16_to_f32(a.s);
        } else {
            const auto& a = block_at<block_q8_0>(act_row, b);
            aq = a.qs;
            ad = f16_to_f32(a.d);
        }
        const int32_t isum = int_dot(block.q, aq, 32);
        sum += static_cast<float>(isum) * (block.d * ad);
        if (block.has_min) sum -= block.dmin * static_cast<float>(block.min[0]) * as;
    }
    return sum;
}

// Super-blocks of 256 against Q8_K: d * da * sum(scale * dot) - dmin * da * sum(min * bsum).
float dot_row_q8_k(GgmlType type, const std::byte* w_row, const std::byte* act_row,
                   int64_t n_blocks) {
    const std::size_t stride = type_size(type);
    UnpackedBlock block;
    float sum = 0.0f;
    for (int64_t b = 0; b < n_blocks; ++b) {
        unpack_block(type, w_row + b * static_cast<int64_t>(stride), block);
        const auto& a = block_at<block_q8_K>(act_row, b);
        int32_t isum = 0;
        int32_t min_sum = 0;
        for (int s = 0; s < block.n_sub; ++s) {
            const int off = s * block.sub_size;
            isum += block.scale[s] * int_dot(block.q + off, a.qs + off, block.sub_size);
            if (block.has_min) {
                int32_t bsum = 0;
                for (int i = off / 16; i < (off + block.sub_size) / 16; ++i) bsum += a.bsums[i];
                min_sum += block.min[s] * bsum;
            }
        }
        sum += block.d * a.d * static_cast<float>(isum);
        if (block.has_min) sum -= block.dmin * a.d * static_cast<float>(min_sum);
    }
    return sum;
}

}  // namespace

std::size_t activation_row_bytes(GgmlType activation_type, int64_t n_cols) {
    if (activation_type == GgmlType::F32) return static_cast<std::size_t>(n_cols) * sizeof(float);
    return row_size(activation_type, n_cols);
}

float dot_row_scalar(GgmlType type, const std::byte* w_row, const std::byte* act_row,
                     int64_t n_cols) {
    switch (type) {
        case GgmlType::F32:
        case GgmlType::F16:
        case GgmlType::BF16:
            return dot_float_row(type, w_row, reinterpret_cast<const float*>(act_row), n_cols);
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
            return dot_row_q8_32(type, w_row, act_row, n_cols / 32, true);
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::IQ4_NL:
            return dot_row_q8_32(type, w_row, act_row, n_cols / 32, false);
        default:
            return dot_row_q8_k(type, w_row, act_row, n_cols / QK_K);
    }
}

void matmul_rows_scalar(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                        int64_t row_end, float* y, int64_t y_stride) {
    const std::size_t w_row_bytes = row_size(w.type, w.n_cols);
    for (int64_t r = row_begin; r < row_end; ++r) {
        const std::byte* w_row = w.data.data() + static_cast<std::size_t>(r) * w_row_bytes;
        for (int64_t t = 0; t < act.n_tokens; ++t) {
            const std::byte* a_row = act.data + static_cast<std::size_t>(t) * act.row_bytes;
            y[t * y_stride + r] = dot_row_scalar(w.type, w_row, a_row, w.n_cols);
        }
    }
}

}  // namespace minfer::kernels
