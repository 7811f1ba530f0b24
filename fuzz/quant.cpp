// Fuzzes the block formats: any bytes must dequantize without undefined behaviour, and any floats
// (NaN, infinities, denormals, huge values) must quantize without undefined behaviour and give
// blocks that dequantize again. Input: byte 0 picks the type, the rest is block bytes / floats.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "seed_dir.h"

namespace {

using minfer::GgmlType;

constexpr GgmlType kTypes[] = {
    GgmlType::F16,    GgmlType::BF16,  GgmlType::Q4_0,  GgmlType::Q4_1, GgmlType::Q5_0,
    GgmlType::Q5_1,   GgmlType::Q8_0,  GgmlType::Q8_1,  GgmlType::Q2_K, GgmlType::Q3_K,
    GgmlType::Q4_K,   GgmlType::Q5_K,  GgmlType::Q6_K,  GgmlType::Q8_K, GgmlType::IQ4_NL,
    GgmlType::IQ4_XS, GgmlType::TQ1_0, GgmlType::TQ2_0,
};
constexpr std::size_t kMaxBlocks = 4;

void write_seeds() {
    const auto dir = minfer::fuzz::empty_seed_dir();
    if (!dir) return;
    for (std::size_t t = 0; t < std::size(kTypes); ++t) {
        std::vector<unsigned char> seed(1 + 256 * sizeof(float));
        seed[0] = static_cast<unsigned char>(t);
        for (int i = 0; i < 256; ++i) {
            const float v = static_cast<float>(i % 17 - 8) * 0.37f;
            std::memcpy(seed.data() + 1 + i * sizeof(float), &v, sizeof(v));
        }
        std::ofstream(*dir / ("seed-" + std::to_string(t)), std::ios::binary)
            .write(reinterpret_cast<const char*>(seed.data()),
                   static_cast<std::streamsize>(seed.size()));
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    write_seeds();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const GgmlType type = kTypes[data[0] % std::size(kTypes)];
    const uint8_t* body = data + 1;
    const std::size_t body_size = size - 1;
    const auto block = static_cast<std::size_t>(minfer::block_size(type));
    const std::size_t block_bytes = minfer::type_size(type);

    // Bytes as blocks (only types that dequantize; Q8_1 does not).
    const std::size_t n_blocks = std::min(kMaxBlocks, body_size / block_bytes);
    std::vector<float> values(kMaxBlocks * 256);
    if (n_blocks > 0 && minfer::can_dequantize(type)) {
        minfer::dequantize_row(type, body, values.data(), static_cast<int64_t>(n_blocks * block));
    }

    // Bytes as floats, repeated to fill whole blocks.
    if (body_size >= sizeof(float) && minfer::can_quantize(type)) {
        const std::size_t n_floats = body_size / sizeof(float);
        const std::size_t n = std::min(kMaxBlocks * 256, ((n_floats + block - 1) / block) * block);
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) {
            std::memcpy(&x[i], body + (i % n_floats) * sizeof(float), sizeof(float));
        }
        std::vector<std::byte> q(minfer::row_size(type, static_cast<int64_t>(n)) + 1);
        minfer::quantize_row(type, x.data(), q.data() + 1, static_cast<int64_t>(n));  // odd address
        if (minfer::can_dequantize(type)) {
            std::vector<float> back(n);
            minfer::dequantize_row(type, q.data() + 1, back.data(), static_cast<int64_t>(n));
        }
    }
    return 0;
}
