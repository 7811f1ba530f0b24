#include "quant/dequantize.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace minfer {

bool can_dequantize(GgmlType type) {
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
        case GgmlType::Q8_K:
        case GgmlType::IQ4_NL:
        case GgmlType::IQ4_XS:
        case GgmlType::TQ1_0:
        case GgmlType::TQ2_0:
            return true;
        default:
            return false;
    }
}

void dequantize_row_f16(const void* src, float* dst, int64_t n) {
    const auto* bytes = static_cast<const std::byte*>(src);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, sizeof(h));
        dst[i] = f16_to_f32(h);
    }
}

void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
    const auto* bytes = static_cast<const std::byte*>(src);
    for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, bytes + 2 * i, sizeof(h));
        dst[i] = bf16_to_f32(h);
    }
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
    if (!can_dequantize(type)) {
        throw UnsupportedError(concat("dequantizing type ", type_name(type), " is not supported"));
    }
    if (n < 0 || n % block_size(type) != 0) {
        throw Error(concat("cannot dequantize ", n, " values of type ", type_name(type),
                           ": not a multiple of its block size ", block_size(type)));
    }
    switch (type) {
        case GgmlType::F32:
            std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(float));
            return;
        case GgmlType::F16:
            return dequantize_row_f16(src, dst, n);
        case GgmlType::BF16:
            return dequantize_row_bf16(src, dst, n);
        case GgmlType::Q4_0:
            return dequantize_row_q4_0(src, dst, n);
        case GgmlType::Q4_1:
            return dequantize_row_q4_1(src, dst, n);
        case GgmlType::Q5_0:
            return dequantize_row_q5_0(src, dst, n);
        case GgmlType::Q5_1:
            return dequantize_row_q5_1(src, dst, n);
        case GgmlType::Q8_0:
            return dequantize_row_q8_0(src, dst, n);
        case GgmlType::Q2_K:
            return dequantize_row_q2_K(src, dst, n);
        case GgmlType::Q3_K:
            return dequantize_row_q3_K(src, dst, n);
        case GgmlType::Q4_K:
            return dequantize_row_q4_K(src, dst, n);
        case GgmlType::Q5_K:
            return dequantize_row_q5_K(src, dst, n);
        case GgmlType::Q6_K:
            return dequantize_row_q6_K(src, dst, n);
        case GgmlType::Q8_K:
            return dequantize_row_q8_K(src, dst, n);
        case GgmlType::IQ4_NL:
            return dequantize_row_iq4_nl(src, dst, n);
        case GgmlType::IQ4_XS:
            return dequantize_row_iq4_xs(src, dst, n);
        case GgmlType::TQ1_0:
            return dequantize_row_tq1_0(src, dst, n);
        case GgmlType::TQ2_0:
            return dequantize_row_tq2_0(src, dst, n);
        default:
            break;  // excluded by can_dequantize
    }
}

}  // namespace minfer
