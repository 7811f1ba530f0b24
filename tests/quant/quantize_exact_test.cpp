// Quantizers that must give exactly ggml's bytes: the 32-value block types against the fixture's
// q.T, and the activation formats Q8_0 / Q8_1 / Q8_K.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/fixtures.h"
#include "core/error.h"
#include "core/half.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"
#include "quant_fixture.h"

namespace minfer {
namespace {

class QuantizeExact : public ::testing::TestWithParam<GgmlType> {};

TEST_P(QuantizeExact, ReproducesGgmlBytes) {
    MINFER_REQUIRE_FIXTURE(path, test::kQuantFixture);
    const GgufFile file = GgufFile::open(path);
    const GgmlType type = GetParam();
    const std::vector<float> src = test::read_f32_tensor(file, "src");
    const TensorInfo& expected = file.tensor("q." + std::string(type_name(type)));
    const int64_t n_per_row = file.tensor("src").ne[0];
    const int64_t n_rows = file.tensor("src").n_rows();

    std::vector<std::byte> got(row_size(type, n_per_row) * static_cast<std::size_t>(n_rows));
    ASSERT_EQ(quantize_rows(type, src.data(), got.data(), n_rows, n_per_row), got.size());
    ASSERT_EQ(got.size(), expected.n_bytes);
    int differing = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (got[i] != expected.data[i] && ++differing <= 5) {
            ADD_FAILURE() << type_name(type) << " byte " << i << " (block " << i / type_size(type)
                          << "): got " << static_cast<int>(got[i]) << ", ggml "
                          << static_cast<int>(expected.data[i]);
        }
    }
    EXPECT_EQ(differing, 0);
}

INSTANTIATE_TEST_SUITE_P(LegacyTypes, QuantizeExact,
                         ::testing::Values(GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0,
                                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                           GgmlType::Q8_0),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                             return std::string(type_name(param_info.param));
                         });

TEST(QuantizeActivations, Q8_0MatchesFixtureBytes) {
    MINFER_REQUIRE_FIXTURE(path, test::kQuantFixture);
    const GgufFile file = GgufFile::open(path);
    const std::vector<float> src = test::read_f32_tensor(file, "src");
    const TensorInfo& expected = file.tensor("q.q8_0");
    std::vector<block_q8_0> blocks(src.size() / QK8_0);
    quantize_row_q8_0(src.data(), blocks.data(), static_cast<int64_t>(src.size()));
    ASSERT_EQ(blocks.size() * sizeof(block_q8_0), expected.n_bytes);
    EXPECT_EQ(std::memcmp(blocks.data(), expected.data.data(), expected.n_bytes), 0);
}

// Q8_1 carries Q8_0's d and quants (same rounding) plus s = d * sum(q).
TEST(QuantizeActivations, Q8_1IsQ8_0PlusSum) {
    MINFER_REQUIRE_FIXTURE(path, test::kQuantFixture);
    const GgufFile file = GgufFile::open(path);
    const std::vector<float> src = test::read_f32_tensor(file, "src");
    const TensorInfo& q8_0 = file.tensor("q.q8_0");
    std::vector<block_q8_1> blocks(src.size() / QK8_1);
    quantize_row_q8_1(src.data(), blocks.data(), static_cast<int64_t>(src.size()));
    for (std::size_t b = 0; b < blocks.size(); ++b) {
        block_q8_0 reference;
        std::memcpy(&reference, q8_0.data.data() + b * sizeof(block_q8_0), sizeof(reference));
        ASSERT_EQ(blocks[b].d, reference.d) << "block " << b;
        int sum = 0;
        for (int j = 0; j < QK8_1; ++j) {
            ASSERT_EQ(blocks[b].qs[j], reference.qs[j]) << "block " << b << " value " << j;
            sum += reference.qs[j];
        }
        // ggml computes s from the f32 d before rounding it to f16.
        const float d = src.empty() ? 0.0f : [&] {
            float amax = 0;
            for (int j = 0; j < QK8_1; ++j) amax = std::max(amax, std::fabs(src[b * QK8_1 + j]));
            return amax / 127;
        }();
        EXPECT_EQ(blocks[b].s, f32_to_f16(static_cast<float>(sum) * d)) << "block " << b;
    }
}

// Q8_K: d = max / -127 for the value of largest magnitude, quants rounded half to even, the
// value of largest magnitude maps to -127, bsums are the sums of each 16 quants.
TEST(QuantizeActivations, Q8_KFollowsItsDefinition) {
    std::vector<float> x(2 * QK_K);
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = std::sin(0.37f * static_cast<float>(i)) * (1.0f + static_cast<float>(i % 7));
    }
    x[300] = -9.5f;  // the largest magnitude of block 1, negative
    std::vector<block_q8_K> blocks(2);
    quantize_row_q8_K(x.data(), blocks.data(), static_cast<int64_t>(x.size()));
    for (int b = 0; b < 2; ++b) {
        float max = 0;
        for (int j = 0; j < QK_K; ++j) {
            if (std::fabs(x[b * QK_K + j]) > std::fabs(max)) max = x[b * QK_K + j];
        }
        const float iscale = -127.f / max;
        EXPECT_EQ(blocks[b].d, 1 / iscale);
        for (int j = 0; j < QK_K; ++j) {
            const float scaled = iscale * x[b * QK_K + j];
            EXPECT_EQ(blocks[b].qs[j], static_cast<int8_t>(std::nearbyint(scaled)))
                << "block " << b << " value " << j;
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += blocks[b].qs[16 * g + j];
            EXPECT_EQ(blocks[b].bsums[g], sum);
        }
    }
    EXPECT_EQ(blocks[1].qs[300 - QK_K], -127);  // -9.5 * (-127 / -9.5)
    std::vector<float> back(x.size());
    dequantize_row(GgmlType::Q8_K, blocks.data(), back.data(), static_cast<int64_t>(x.size()));
    for (std::size_t i = 0; i < x.size(); ++i) {
        EXPECT_LE(std::fabs(back[i] - x[i]), std::fabs(blocks[i / QK_K].d) * 0.5001f) << i;
    }
}

TEST(QuantizeActivations, ZeroBlocksGiveZeroScale) {
    std::vector<float> zeros(QK_K, 0.0f);
    block_q8_K k;
    std::memset(&k, 0x5A, sizeof(k));
    quantize_row_q8_K(zeros.data(), &k, QK_K);
    EXPECT_EQ(k.d, 0.0f);
    for (int j = 0; j < QK_K; ++j) EXPECT_EQ(k.qs[j], 0);
    block_q8_0 b0;
    quantize_row_q8_0(zeros.data(), &b0, QK8_0);
    EXPECT_EQ(b0.d, 0);
    for (int j = 0; j < QK8_0; ++j) EXPECT_EQ(b0.qs[j], 0);
}

// Hostile values (NaN, infinities, denormals, huge) never trap or hit undefined behaviour (the
// asan preset's UBSan checks this) and keep nibble-packed levels in range.
TEST(QuantizeRobustness, NonFiniteAndExtremeInputs) {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float tiny = std::numeric_limits<float>::denorm_min();
    std::vector<float> x(QK_K * 4);
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float specials[] = {nan, inf, -inf, tiny, -tiny, 3e38f, -3e38f, 1e-30f, 0.0f, 1.0f};
        x[i] = specials[(i * 7 + i / 13) % 10];
    }
    for (std::size_t i = QK_K; i < 2 * QK_K; ++i) x[i] = tiny * static_cast<float>(i % 5);
    for (GgmlType t :
         {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
          GgmlType::Q8_1, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
          GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::IQ4_NL, GgmlType::F16, GgmlType::BF16}) {
        std::vector<std::byte> out(row_size(t, static_cast<int64_t>(x.size())) + 1);
        // Also at an odd address.
        EXPECT_NO_THROW(quantize_row(t, x.data(), out.data() + 1, static_cast<int64_t>(x.size())))
            << type_name(t);
        if (can_dequantize(t)) {
            std::vector<float> back(x.size());
            EXPECT_NO_THROW(
                dequantize_row(t, out.data() + 1, back.data(), static_cast<int64_t>(x.size())));
        }
    }
}

TEST(QuantizeContract, RejectsUnsupportedTypeAndBadLength) {
    std::vector<float> x(512, 1.0f);
    std::vector<std::byte> out(4096);
    EXPECT_THROW(quantize_row(GgmlType::IQ2_XXS, x.data(), out.data(), 256), UnsupportedError);
    EXPECT_THROW(quantize_row(GgmlType::TQ1_0, x.data(), out.data(), 256), UnsupportedError);
    EXPECT_THROW(quantize_row(GgmlType::Q4_K, x.data(), out.data(), 255), Error);
    EXPECT_THROW(quantize_rows(GgmlType::Q4_0, x.data(), out.data(), 2, 33), Error);
    EXPECT_THROW(quantize_rows(GgmlType::Q4_0, x.data(), out.data(), -1, 32), Error);
    EXPECT_EQ(quantize_rows(GgmlType::Q4_0, x.data(), out.data(), 2, 64),
              2 * 2 * sizeof(block_q4_0));
    EXPECT_FALSE(can_quantize(GgmlType::IQ4_XS));
    EXPECT_TRUE(can_quantize(GgmlType::Q6_K));
}

}  // namespace
}  // namespace minfer
