// Quantization to IQ4_NL: 32 values share one f16 scale d, each value is the nearest of the 16
// non-linear levels kvalues_iq4nl times d. Follows ggml's quantize_iq4_nl without an importance
// matrix (weights x^2, 15 trial scales around max / -127).

#include <cmath>

#include "core/half.h"
#include "quant/block_types.h"
#include "quant/quantize_impl.h"
#include "quant/rounding.h"
#include "quant/scale_search.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // same rounding as ggml: no fused multiply-add
#endif

namespace minfer::quant_detail {
namespace {

constexpr int kTrials = 7;  // trial scales (itry + kvalues[0]) / max for itry in -7..7

// Index of the level nearest to v (the lower one on ties), by binary search over the sorted
// levels. NaN gives the top level.
int nearest_level(float v) {
    const int8_t* values = kvalues_iq4nl;
    if (v <= static_cast<float>(values[0])) return 0;
    if (v >= static_cast<float>(values[15])) return 15;
    int lo = 0;
    int hi = 15;
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (v < static_cast<float>(values[mid])) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    return v - static_cast<float>(values[hi - 1]) < static_cast<float>(values[hi]) - v ? hi - 1
                                                                                       : hi;
}

// Weighted fit of x to the levels chosen with inverse scale id: sumqx = sum w q x, sumq2 =
// sum w q^2 with q the level value.
struct Fit {
    float sumqx = 0;
    float sumq2 = 0;
};

Fit fit_levels(const float* x, const float* weights, float id) {
    Fit fit;
    for (int j = 0; j < QK4_NL; ++j) {
        const auto q = static_cast<float>(kvalues_iq4nl[nearest_level(id * x[j])]);
        fit.sumqx += weights[j] * q * x[j];
        fit.sumq2 += weights[j] * q * q;
    }
    return fit;
}

}  // namespace

block_iq4_nl quantize_block_iq4_nl(const float* x) {
    float weights[QK4_NL];
    float amax = 0;
    float max = 0;
    for (int j = 0; j < QK4_NL; ++j) {
        weights[j] = x[j] * x[j];
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    float d = 0;
    if (amax >= kGroupMaxEps) {
        const auto first_level = static_cast<float>(kvalues_iq4nl[0]);  // -127
        Fit fit = fit_levels(x, weights, 1 / (-max / first_level));
        d = fit.sumqx / fit.sumq2;
        float best = d * fit.sumqx;
        for (int trial = -kTrials; trial <= kTrials; ++trial) {
            const float id = static_cast<float>(trial + kvalues_iq4nl[0]) / max;
            fit = fit_levels(x, weights, id);
            if (fit.sumq2 > 0 && fit.sumqx * fit.sumqx > best * fit.sumq2) {
                d = fit.sumqx / fit.sumq2;
                best = d * fit.sumqx;
            }
        }
    }
    block_iq4_nl y{};
    y.d = f32_to_f16(d);
    const float id = d != 0.0f ? 1 / d : 0.0f;
    for (int j = 0; j < QK4_NL / 2; ++j) {
        const int lo = nearest_level(id * x[j]);
        const int hi = nearest_level(id * x[j + QK4_NL / 2]);
        y.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
    return y;
}

}  // namespace minfer::quant_detail
