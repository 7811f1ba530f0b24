#include "quant/quantize.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "quant/quantize_impl.h"

namespace minfer {
namespace {

using RowQuantizer = void (*)(const float* x, void* dst, int64_t n);

void convert_to_f32(const float* x, void* dst, int64_t n) {
    std::memcpy(dst, x, static_cast<std::size_t>(n) * sizeof(float));
}

template <uint16_t (*kConvert)(float)>
void convert_to_half(const float* x, void* dst, int64_t n) {
    auto* bytes = static_cast<std::byte*>(dst);
    for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = kConvert(x[i]);
        std::memcpy(bytes + 2 * i, &h, sizeof(h));
    }
}

RowQuantizer row_quantizer(GgmlType type) {
    using namespace quant_detail;
    switch (type) {
        case GgmlType::F32:
            return convert_to_f32;
        case GgmlType::F16:
            return convert_to_half<f32_to_f16>;
        case GgmlType::BF16:
            return convert_to_half<f32_to_bf16>;
        case GgmlType::Q4_0:
            return quantize_q4_0;
        case GgmlType::Q4_1:
            return quantize_q4_1;
        case GgmlType::Q5_0:
            return quantize_q5_0;
        case GgmlType::Q5_1:
            return quantize_q5_1;
        case GgmlType::Q8_0:
            return quantize_q8_0;
        case GgmlType::Q8_1:
            return quantize_q8_1;
        case GgmlType::Q2_K:
            return quantize_q2_K;
        case GgmlType::Q3_K:
            return quantize_q3_K;
        case GgmlType::Q4_K:
            return quantize_q4_K;
        case GgmlType::Q5_K:
            return quantize_q5_K;
        case GgmlType::Q6_K:
            return quantize_q6_K;
        case GgmlType::Q8_K:
            return quantize_q8_K;
        case GgmlType::IQ4_NL:
            return quantize_iq4_nl;
        default:
            return nullptr;
    }
}

RowQuantizer checked_row_quantizer(GgmlType type, int64_t n_per_row) {
    const RowQuantizer quantizer = row_quantizer(type);
    if (quantizer == nullptr) {
        throw UnsupportedError(concat("quantizing to type ", type_name(type), " is not supported"));
    }
    if (n_per_row < 0 || n_per_row % block_size(type) != 0) {
        throw Error(concat("cannot quantize rows of ", n_per_row, " values to ", type_name(type),
                           ": not a multiple of its block size ", block_size(type)));
    }
    return quantizer;
}

}  // namespace

bool can_quantize(GgmlType type) {
    return row_quantizer(type) != nullptr;
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
    checked_row_quantizer(type, n)(src, dst, n);
}

std::size_t quantize_rows(GgmlType type, const float* src, void* dst, int64_t n_rows,
                          int64_t n_per_row) {
    const RowQuantizer quantizer = checked_row_quantizer(type, n_per_row);
    if (n_rows < 0) throw Error(concat("cannot quantize ", n_rows, " rows"));
    const std::size_t bytes_per_row = row_size(type, n_per_row);
    auto* out = static_cast<std::byte*>(dst);
    for (int64_t r = 0; r < n_rows; ++r) {
        quantizer(src + r * n_per_row, out + static_cast<std::size_t>(r) * bytes_per_row,
                  n_per_row);
    }
    return static_cast<std::size_t>(n_rows) * bytes_per_row;
}

}  // namespace minfer
