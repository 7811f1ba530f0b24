#pragma once
// Helpers for the model-quantizer tests: whole tensors dequantized to f32 and compared.

#include <span>
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/dequantize.h"
#include "quant_fixture.h"

namespace minfer::test {

inline std::vector<float> dequantize_tensor(const TensorInfo& t) {
    std::vector<float> values(static_cast<std::size_t>(t.n_elements()));
    const int64_t n_per_row = t.ne[0];
    const std::size_t row_bytes = row_size(t.type, n_per_row);
    for (int64_t r = 0; r < t.n_rows(); ++r) {
        dequantize_row(t.type, t.data.data() + r * row_bytes, values.data() + r * n_per_row,
                       n_per_row);
    }
    return values;
}

// Relative RMSE of tensor `a` against tensor `reference` (same shape).
inline double tensor_relative_rmse(const TensorInfo& a, const TensorInfo& reference) {
    return relative_rmse(dequantize_tensor(a), dequantize_tensor(reference));
}

}  // namespace minfer::test
