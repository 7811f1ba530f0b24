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

// A row of n values (a multiple of kValues) as n / kValues blocks at dst (any address).
template <int kValues, auto kQuantizeBlock>
void quantize_block_row(const float* x, void* dst, int64_t n) {
    quant_detail::quantize_blocks<kValues>(x, dst, n, kQuantizeBlock);
}

struct RowQuantizerEntry {
    GgmlType type;
    RowQuantizer quantize;
};

// Every type quantize_row produces, with its quantizer.
constexpr RowQuantizerEntry kRowQuantizers[] = {
    {GgmlType::F32, convert_to_f32},
    {GgmlType::F16, convert_to_half<f32_to_f16>},
    {GgmlType::BF16, convert_to_half<f32_to_bf16>},
    {GgmlType::Q4_0, quantize_block_row<QK4_0, quant_detail::quantize_block_q4_0>},
    {GgmlType::Q4_1, quantize_block_row<QK4_1, quant_detail::quantize_block_q4_1>},
    {GgmlType::Q5_0, quantize_block_row<QK5_0, quant_detail::quantize_block_q5_0>},
    {GgmlType::Q5_1, quantize_block_row<QK5_1, quant_detail::quantize_block_q5_1>},
    {GgmlType::Q8_0, quantize_block_row<QK8_0, quant_detail::quantize_block_q8_0>},
    {GgmlType::Q8_1, quantize_block_row<QK8_1, quant_detail::quantize_block_q8_1>},
    {GgmlType::Q2_K, quantize_block_row<QK_K, quant_detail::quantize_block_q2_K>},
    {GgmlType::Q3_K, quantize_block_row<QK_K, quant_detail::quantize_block_q3_K>},
    {GgmlType::Q4_K, quantize_block_row<QK_K, quant_detail::quantize_block_q4_K>},
    {GgmlType::Q5_K, quantize_block_row<QK_K, quant_detail::quantize_block_q5_K>},
    {GgmlType::Q6_K, quantize_block_row<QK_K, quant_detail::quantize_block_q6_K>},
    {GgmlType::Q8_K, quantize_block_row<QK_K, quant_detail::quantize_block_q8_K>},
    {GgmlType::IQ4_NL, quantize_block_row<QK4_NL, quant_detail::quantize_block_iq4_nl>},
};

RowQuantizer row_quantizer(GgmlType type) {
    for (const RowQuantizerEntry& entry : kRowQuantizers)
        if (entry.type == type) return entry.quantize;
    return nullptr;
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

void quantize_row_q8_0(const float* x, block_q8_0* y, int64_t n) {
    quantize_block_row<QK8_0, quant_detail::quantize_block_q8_0>(x, y, n);
}
void quantize_row_q8_1(const float* x, block_q8_1* y, int64_t n) {
    quantize_block_row<QK8_1, quant_detail::quantize_block_q8_1>(x, y, n);
}
void quantize_row_q8_K(const float* x, block_q8_K* y, int64_t n) {
    quantize_block_row<QK_K, quant_detail::quantize_block_q8_K>(x, y, n);
}

}  // namespace minfer
