// RoPE's per-frequency factors (rope_freqs.weight, Llama 3.1): pair i's angle is divided by
// factor i.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace minfer {
namespace {

TEST(RopeFreqFactors, DivideEachPairsAngle) {
    constexpr int64_t kHeadDim = 8;
    const std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};
    std::vector<float> x(kHeadDim, 1.0f);
    const std::vector<int32_t> positions = {5};
    RopeConfig config;
    config.style = RopeStyle::kNormal;
    config.head_dim = kHeadDim;
    config.n_dims = kHeadDim;
    config.freq_base = 10000.0f;
    config.freq_factors = factors.data();
    rope(x.data(), 1, 1, positions, config);
    for (int i = 0; i < kHeadDim / 2; ++i) {
        const double theta = 5.0 * std::pow(10000.0, -2.0 * i / kHeadDim) / factors[static_cast<std::size_t>(i)];
        EXPECT_NEAR(x[2 * i], std::cos(theta) - std::sin(theta), 1e-5) << i;
        EXPECT_NEAR(x[2 * i + 1], std::sin(theta) + std::cos(theta), 1e-5) << i;
    }
}

}  // namespace
}  // namespace minfer
