// Dequantization against ggml's own output in the quant fixture (bit for bit), and the contract
// of dequantize_row on bad arguments.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "common/fixtures.h"
#include "core/error.h"
#include "quant/dequantize.h"
#include "quant_fixture.h"

namespace minfer {
namespace {

class DequantizeFixture : public ::testing::TestWithParam<GgmlType> {};

TEST_P(DequantizeFixture, ReproducesGgmlBitForBit) {
    MINFER_REQUIRE_FIXTURE(path, test::kQuantFixture);
    const GgufFile file = GgufFile::open(path);
    const GgmlType type = GetParam();
    const std::string name(type_name(type));
    const TensorInfo& q = file.tensor("q." + name);
    ASSERT_EQ(q.type, type);
    const std::vector<float> expected = test::read_f32_tensor(file, "deq." + name);

    const int64_t n_per_row = q.ne[0];
    const std::size_t bytes_per_row = row_size(type, n_per_row);
    ASSERT_EQ(q.n_bytes, bytes_per_row * static_cast<std::size_t>(q.n_rows()));
    std::vector<float> got(expected.size(), std::nanf(""));
    for (int64_t r = 0; r < q.n_rows(); ++r) {
        dequantize_row(type, q.data.data() + r * bytes_per_row, got.data() + r * n_per_row,
                       n_per_row);
    }
    int mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(expected[i])) {
            if (++mismatches <= 5) {
                ADD_FAILURE() << name << " value " << i << " (row " << i / n_per_row << "): got "
                              << got[i] << ", ggml " << expected[i];
            }
        }
    }
    EXPECT_EQ(mismatches, 0) << name << ": values differing from ggml";
}

INSTANTIATE_TEST_SUITE_P(AllFixtureTypes, DequantizeFixture,
                         ::testing::Values(GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0,
                                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                           GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
                                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                           GgmlType::IQ4_NL, GgmlType::IQ4_XS, GgmlType::TQ1_0,
                                           GgmlType::TQ2_0),
                         [](const ::testing::TestParamInfo<GgmlType>& param_info) {
                             return std::string(type_name(param_info.param));
                         });

TEST(Dequantize, CanDequantizeListsExactlyTheImplementedTypes) {
    for (GgmlType t :
         {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1,
          GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K,
          GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K, GgmlType::IQ4_NL,
          GgmlType::IQ4_XS, GgmlType::TQ1_0, GgmlType::TQ2_0}) {
        EXPECT_TRUE(can_dequantize(t)) << type_name(t);
    }
    for (GgmlType t : {GgmlType::IQ2_XXS, GgmlType::IQ2_XS, GgmlType::IQ3_XXS, GgmlType::IQ1_S,
                       GgmlType::IQ3_S, GgmlType::IQ2_S, GgmlType::IQ1_M, GgmlType::MXFP4,
                       GgmlType::Q8_1, GgmlType::I8, GgmlType::I32, GgmlType::F64}) {
        EXPECT_FALSE(can_dequantize(t)) << type_name(t);
    }
}

TEST(Dequantize, RejectsUnsupportedTypeAndBadLength) {
    std::vector<std::byte> block(256);
    std::vector<float> out(256);
    EXPECT_THROW(dequantize_row(GgmlType::IQ2_XXS, block.data(), out.data(), 256),
                 UnsupportedError);
    EXPECT_THROW(dequantize_row(GgmlType::Q4_0, block.data(), out.data(), 31), Error);
    EXPECT_THROW(dequantize_row(GgmlType::Q4_K, block.data(), out.data(), 32), Error);
    EXPECT_THROW(dequantize_row(GgmlType::Q4_0, block.data(), out.data(), -32), Error);
    EXPECT_NO_THROW(dequantize_row(GgmlType::Q4_0, block.data(), out.data(), 0));
}

// Blocks read from an odd address (a GGUF file with alignment 1) decode the same.
TEST(Dequantize, AcceptsMisalignedSource) {
    block_q8_K block{};
    block.d = 0.5f;
    for (int i = 0; i < QK_K; ++i) block.qs[i] = static_cast<int8_t>(i - 128);
    std::vector<std::byte> bytes(sizeof(block) + 1);
    std::memcpy(bytes.data() + 1, &block, sizeof(block));
    std::vector<float> out(QK_K);
    dequantize_row(GgmlType::Q8_K, bytes.data() + 1, out.data(), QK_K);
    for (int i = 0; i < QK_K; ++i) EXPECT_EQ(out[i], 0.5f * static_cast<float>(i - 128));
}

// Hand-made Q4_0 block: d = 1 (f16 0x3C00), nibble j = j % 16.
TEST(Dequantize, Q4_0ByHand) {
    block_q4_0 block{};
    block.d = 0x3C00;
    for (int j = 0; j < 16; ++j) block.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float out[32];
    dequantize_row(GgmlType::Q4_0, &block, out, 32);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(out[j], static_cast<float>(j - 8));
        EXPECT_EQ(out[j + 16], static_cast<float>(7 - j));
    }
}

}  // namespace
}  // namespace minfer
