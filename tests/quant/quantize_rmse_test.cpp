// Quantizers judged by their error: the K-quants and IQ4_NL must reach a relative RMSE no more
// than 2% above ggml's own on the fixture rows (ggml's error: deq.T against src), over the whole
// matrix and on each row (row 1 has outliers, row 2 starts with zeros, row 3 is tiny values).

#include <gtest/gtest.h>

#include <cstdio>
#include <span>
#include <vector>

#include "common/fixtures.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant_fixture.h"

namespace minfer {
namespace {

constexpr double kAllowedRatio = 1.02;

class QuantizeRmse : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantizeRmse, NoWorseThanGgml) {
    MINFER_REQUIRE_FIXTURE(path, test::kQuantFixture);
    const GgufFile file = GgufFile::open(path);
    const GgmlType type = GetParam();
    const std::string name(type_name(type));
    const std::vector<float> src = test::read_f32_tensor(file, "src");
    const std::vector<float> ggml_deq = test::read_f32_tensor(file, "deq." + name);
    const TensorInfo& ggml_q = file.tensor("q." + name);
    const int64_t n_per_row = file.tensor("src").ne[0];
    const int64_t n_rows = file.tensor("src").n_rows();

    std::vector<std::byte> q(row_size(type, n_per_row) * static_cast<std::size_t>(n_rows));
    quantize_rows(type, src.data(), q.data(), n_rows, n_per_row);
    std::vector<float> deq(src.size());
    for (int64_t r = 0; r < n_rows; ++r) {
        dequantize_row(type, q.data() + r * row_size(type, n_per_row), deq.data() + r * n_per_row,
                       n_per_row);
    }

    const double ours = test::relative_rmse(deq, src);
    const double ggml = test::relative_rmse(ggml_deq, src);
    EXPECT_LE(ours, ggml * kAllowedRatio) << name << ": ours " << ours << ", ggml " << ggml;
    for (int64_t r = 0; r < n_rows; ++r) {
        const std::size_t at = static_cast<std::size_t>(r * n_per_row);
        const auto n = static_cast<std::size_t>(n_per_row);
        const double row_ours =
            test::relative_rmse(std::span(deq).subspan(at, n), std::span(src).subspan(at, n));
        const double row_ggml =
            test::relative_rmse(std::span(ggml_deq).subspan(at, n), std::span(src).subspan(at, n));
        EXPECT_LE(row_ours, row_ggml * kAllowedRatio + 1e-12) << name << " row " << r;
    }

    std::size_t same_bytes = 0;
    for (std::size_t i = 0; i < q.size(); ++i) same_bytes += q[i] == ggml_q.data[i];
    RecordProperty("relative_rmse", std::to_string(ours));
    RecordProperty("ggml_relative_rmse", std::to_string(ggml));
    std::printf("  %-7s relative RMSE %.6f (ggml %.6f), %zu of %zu bytes identical to ggml\n",
                name.c_str(), ours, ggml, same_bytes, q.size());
    // Stronger than the RMSE bound: the same algorithm as ggml's reference quantizer gives the
    // same bytes, so a model quantized by minfer equals one quantized by llama-quantize.
    EXPECT_EQ(same_bytes, q.size()) << name;
}

INSTANTIATE_TEST_SUITE_P(SearchedTypes, QuantizeRmse,
                         ::testing::Values(GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                                           GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                             return std::string(type_name(param_info.param));
                         });

}  // namespace
}  // namespace minfer
