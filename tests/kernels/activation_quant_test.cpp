// The activation quantizers of matmul against the reference ones of src/quant (ggml's C
// reference code) and against each other (scalar vs every SIMD target).
//
// Q8_K: ggml uses its reference code on x86 too, so ours must be bit-identical.
// Q8_0 / Q8_1: ggml's x86 code (what llama.cpp runs on this machine) differs from its C
// reference in two ways: it multiplies by 127 / amax instead of 1 / (amax / 127), and rounds
// half to even instead of half away from zero. We follow the x86 code, so against the reference
// the scale d must be identical and a quant may differ only by one, only where x * 127 / amax
// lies within a few f32 roundings of a half-integer.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "hwy/targets.h"
#include "kernels/activation_quant.h"
#include "kernels/matmul_simd.h"
#include "quant/quantize.h"

namespace minfer {
namespace {

std::vector<float> test_rows(int64_t n) {
    std::mt19937 rng(123);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = normal(rng);
        const std::size_t block = i / 256;
        if (block == 1) x[i] = 0.0f;                                  // all zero
        if (block == 2) x[i] *= 1e-30f;                               // tiny
        if (block == 3 && i % 256 == 7) x[i] = -50.0f;                // negative outlier sets scale
        if (block == 4) x[i] = static_cast<float>(i % 256) - 127.0f;  // exact ties: x * 1 = k
        if (block == 5) x[i] = (static_cast<float>(i % 64) - 32.0f) + 0.5f;  // halves
        if (block == 6 && i % 256 == 0) x[i] = 127.0f;                       // halves with id == 1
        if (block == 6 && i % 256 != 0) x[i] = (static_cast<float>(i % 200) - 100.0f) * 0.5f;
    }
    return x;
}

TEST(ActivationQuant, Q8KIsBitIdenticalToTheReference) {
    const int64_t n = 256 * 12;
    const std::vector<float> x = test_rows(n);
    std::vector<block_q8_K> ref(static_cast<std::size_t>(n / 256)), ours(ref.size());
    quantize_row_q8_K(x.data(), ref.data(), n);
    quantize_activations_q8_K(x.data(), ours.data(), n);
    EXPECT_EQ(std::memcmp(ref.data(), ours.data(), ref.size() * sizeof(block_q8_K)), 0);
}

template <class Block>
void expect_x86_rounding(const std::vector<float>& x, const std::vector<Block>& ref,
                         const std::vector<Block>& ours, int& differing) {
    for (std::size_t b = 0; b < ref.size(); ++b) {
        ASSERT_EQ(ref[b].d, ours[b].d) << "block " << b;
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
        for (int j = 0; j < 32; ++j) {
            if (ref[b].qs[j] == ours[b].qs[j]) continue;
            ++differing;
            const double scaled = static_cast<double>(x[b * 32 + j]) * 127.0 / amax;
            const double distance_to_half = std::fabs(scaled - std::floor(scaled) - 0.5);
            EXPECT_EQ(std::abs(ref[b].qs[j] - ours[b].qs[j]), 1);
            EXPECT_LE(distance_to_half, 1e-5 * std::fabs(scaled) + 1e-30)
                << "block " << b << " value " << j << ": " << x[b * 32 + j];
        }
    }
}

TEST(ActivationQuant, Q8_0AndQ8_1FollowGgmlsX86Rounding) {
    const int64_t n = 256 * 12;
    const std::vector<float> x = test_rows(n);
    std::vector<block_q8_0> ref0(static_cast<std::size_t>(n / 32)), ours0(ref0.size());
    quantize_row_q8_0(x.data(), ref0.data(), n);
    quantize_activations_q8_0(x.data(), ours0.data(), n);
    int differing = 0;
    expect_x86_rounding(x, ref0, ours0, differing);
    EXPECT_GT(differing, 0) << "the test rows should contain exact ties";
    EXPECT_LT(differing, 200);

    std::vector<block_q8_1> ref1(static_cast<std::size_t>(n / 32)), ours1(ref1.size());
    quantize_row_q8_1(x.data(), ref1.data(), n);
    quantize_activations_q8_1(x.data(), ours1.data(), n);
    differing = 0;
    expect_x86_rounding(x, ref1, ours1, differing);
    for (std::size_t b = 0; b < ours1.size(); ++b) {
        if (std::memcmp(ref1[b].qs, ours1[b].qs, 32) == 0) {
            EXPECT_EQ(ref1[b].s, ours1[b].s) << "block " << b;
            continue;
        }
        float amax = 0;
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            amax = std::fmax(amax, std::fabs(x[b * 32 + j]));
            sum += ours1[b].qs[j];
        }
        EXPECT_EQ(ours1[b].s, f32_to_f16(amax / 127.f * static_cast<float>(sum))) << "block " << b;
    }
}

TEST(ActivationQuant, SimdIsBitIdenticalToScalarOnEveryTarget) {
    const int64_t n = 256 * 12;
    std::vector<float> x = test_rows(n);
    std::vector<std::byte> scalar(row_size(GgmlType::Q8_K, n)), simd(scalar.size());
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        hwy::SetSupportedTargetsForTest(target);
        for (GgmlType type : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
            const std::size_t bytes = row_size(type, n);
            if (type == GgmlType::Q8_0) {
                quantize_activations_q8_0(x.data(), reinterpret_cast<block_q8_0*>(scalar.data()),
                                          n);
            } else if (type == GgmlType::Q8_1) {
                quantize_activations_q8_1(x.data(), reinterpret_cast<block_q8_1*>(scalar.data()),
                                          n);
            } else {
                quantize_activations_q8_K(x.data(), reinterpret_cast<block_q8_K*>(scalar.data()),
                                          n);
            }
            kernels::quantize_activations_simd(type, x.data(), simd.data(), n);
            EXPECT_EQ(std::memcmp(scalar.data(), simd.data(), bytes), 0)
                << hwy::TargetName(target) << " " << type_name(type);
        }
    }
    hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace minfer
