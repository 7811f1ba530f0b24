#pragma once
// Weight matrices of any shape built from ../shared/fixtures/quant/quant-fixtures.gguf: row r of
// a test matrix is a concatenation of 256-value segments of the fixture's ggml-quantized rows
// (`q.T`), and its reference values are the same segments of ggml's own dequantization (`deq.T`).
// So the reference comes from ggml, not from the code under test.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"

namespace minfer::test {

// The 17 weight types matmul supports (issue 3's list).
const std::vector<GgmlType>& matmul_types();

struct TestMatrix {
    GgmlType type;
    int64_t n_cols = 0;
    int64_t n_rows = 0;
    std::vector<std::byte> bytes;  // quantized rows
    std::vector<float> values;     // ggml's dequantization, [n_rows][n_cols]
    struct alignas(64) Line {
        std::byte bytes[64];
    };
    std::vector<Line> packed;  // the interleaved layout (kernels/packed_layout.h), after pack()

    WeightMatrix view() const { return {type, n_cols, n_rows, bytes}; }
    // Builds `packed` (the type must have an interleaved layout).
    void pack();
    // view() with the interleaved copy attached.
    WeightMatrix packed_view() const;
};

class QuantFixture {
  public:
    explicit QuantFixture(const std::string& path);
    // n_cols must be a multiple of the block size (32 for float types). Which fixture segment
    // goes where varies with row and position.
    TestMatrix make_matrix(GgmlType type, int64_t n_rows, int64_t n_cols) const;

  private:
    GgufFile file_;
};

}  // namespace minfer::test
