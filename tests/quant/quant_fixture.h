#pragma once
// Access to ../shared/fixtures/quant/quant-fixtures.gguf: `src` (16 rows x 512 f32) and, per type
// T, `q.T` (src quantized by ggml) and `deq.T` (ggml's dequantization of q.T).

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"

namespace minfer::test {

inline constexpr const char* kQuantFixture = "quant/quant-fixtures.gguf";

// The f32 values of an F32 tensor, copied out (the mapping may not be 4-byte aligned).
inline std::vector<float> read_f32_tensor(const GgufFile& file, const std::string& name) {
    const TensorInfo& t = file.tensor(name);
    std::vector<float> values(static_cast<std::size_t>(t.n_elements()));
    std::memcpy(values.data(), t.data.data(), values.size() * sizeof(float));
    return values;
}

// Relative RMSE: sqrt(sum (a - b)^2 / sum b^2), b the reference.
inline double relative_rmse(std::span<const float> a, std::span<const float> reference) {
    double err = 0;
    double norm = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - reference[i];
        err += d * d;
        norm += static_cast<double>(reference[i]) * reference[i];
    }
    return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

}  // namespace minfer::test
