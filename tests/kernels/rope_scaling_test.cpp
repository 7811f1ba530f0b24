// RoPE with the scalings that have no golden fixture, against their formulas: LongRoPE (phi3:
// per-pair factors that divide the angle, and a magnitude factor on cos and sin) and linear
// scaling (Gemma 3's global layers: positions multiplied by 1 / factor). Neox pairs (i, i + d/2).

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/ops.h"

namespace minfer {
namespace {

constexpr int64_t kHeadDim = 16;

// One head of ones rotated at `pos`; pair i (neox) becomes (cos - sin, sin + cos) * m of its angle.
void expect_rotation(const RopeConfig& config, int32_t pos, const std::vector<double>& angles,
                     double magnitude) {
    std::vector<float> x(kHeadDim, 1.0f);
    const std::vector<int32_t> positions = {pos};
    rope(x.data(), 1, 1, positions, config);
    const int64_t half = config.n_dims / 2;
    // The kernel computes angles in f32 as ggml does: their error grows with the position.
    const double tol = 2e-5 + 5e-7 * pos;
    for (int64_t i = 0; i < half; ++i) {
        const double a = angles[static_cast<std::size_t>(i)];
        EXPECT_NEAR(x[i], magnitude * (std::cos(a) - std::sin(a)), tol) << "pair " << i;
        EXPECT_NEAR(x[i + half], magnitude * (std::sin(a) + std::cos(a)), tol) << "pair " << i;
    }
    for (int64_t d = config.n_dims; d < kHeadDim; ++d) EXPECT_EQ(x[d], 1.0f) << "unrotated " << d;
}

RopeConfig neox(int64_t n_dims, float base) {
    RopeConfig c;
    c.style = RopeStyle::kNeox;
    c.head_dim = kHeadDim;
    c.n_dims = n_dims;
    c.freq_base = base;
    return c;
}

TEST(RopeScaling, LongRopeDividesEachAngleByItsFactorAndScalesTheMagnitude) {
    // Phi-3's long factors grow from 1 at the fastest pair; its attention factor for a 128k
    // context over an original 4k: sqrt(1 + ln(32) / ln(4096)).
    const std::vector<float> factors = {1.0f, 1.25f, 2.5f, 6.0f, 11.0f, 24.0f, 40.0f, 61.0f};
    const double attn_factor = std::sqrt(1.0 + std::log(32.0) / std::log(4096.0));
    RopeConfig c = neox(kHeadDim, 10000.0f);
    c.freq_factors = factors.data();
    c.attn_factor = static_cast<float>(attn_factor);
    for (int32_t pos : {0, 1, 7, 1000, 4096}) {
        std::vector<double> angles;
        for (int64_t i = 0; i < kHeadDim / 2; ++i)
            angles.push_back(pos * std::pow(10000.0, -2.0 * static_cast<double>(i) / kHeadDim) /
                             factors[static_cast<std::size_t>(i)]);
        SCOPED_TRACE(pos);
        expect_rotation(c, pos, angles, attn_factor);
    }
}

TEST(RopeScaling, LinearScalingMultipliesThePosition) {
    // Gemma 3's global layers: base 1,000,000, rope.scaling.factor 8; a partial rotation too.
    RopeConfig c = neox(12, 1000000.0f);
    c.freq_scale = 1.0f / 8.0f;
    for (int32_t pos : {3, 517, 8000}) {
        std::vector<double> angles;
        for (int64_t i = 0; i < 6; ++i)
            angles.push_back(pos / 8.0 * std::pow(1000000.0, -2.0 * static_cast<double>(i) / 12));
        SCOPED_TRACE(pos);
        expect_rotation(c, pos, angles, 1.0);
    }
}

}  // namespace
}  // namespace minfer
