#include "quant/scale_search.h"

#include <algorithm>
#include <cmath>

#include "quant/rounding.h"

#ifdef __clang__
#pragma STDC FP_CONTRACT OFF  // same rounding as ggml: no fused multiply-add
#endif

namespace minfer::quant_detail {
namespace {

// The value of largest magnitude (the first on ties) and that magnitude.
struct SignedMax {
    float value;
    float magnitude;
};

SignedMax signed_max(int n, const float* x) {
    SignedMax r{0.0f, 0.0f};
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > r.magnitude) r = {x[i], ax};
    }
    return r;
}

inline int clamp_level(int l, int lo, int hi) {
    return std::max(lo, std::min(hi, l));
}

}  // namespace

float search_symmetric_scale(int n, int nmax, const float* x, int8_t* levels) {
    const SignedMax max = signed_max(n, x);
    if (max.magnitude < kGroupMaxEps) {
        std::fill(levels, levels + n, int8_t{0});
        return 0.0f;
    }
    // Weighted sums for the scale trial iscale: sumlx = sum w x l, suml2 = sum w l^2.
    auto fit = [&](float iscale, float& sumlx, float& suml2) {
        sumlx = 0;
        suml2 = 0;
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
    };
    auto write_levels = [&](float iscale) {
        for (int i = 0; i < n; ++i) {
            const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            levels[i] = static_cast<int8_t>(l + nmax);
        }
    };

    float iscale = static_cast<float>(-nmax) / max.value;
    float sumlx = 0;
    float suml2 = 0;
    fit(iscale, sumlx, suml2);
    write_levels(iscale);
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int step = -9; step <= 9; ++step) {
        if (step == 0) continue;
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max.value;
        fit(iscale, sumlx, suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            write_levels(iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

float search_symmetric_scale_q3(int n, int nmax, const float* x, int8_t* levels) {
    const SignedMax max = signed_max(n, x);
    if (max.magnitude < kGroupMaxEps) {
        std::fill(levels, levels + n, int8_t{0});
        return 0.0f;
    }
    const float iscale = static_cast<float>(-nmax) / max.value;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        const int l = clamp_level(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        levels[i] = static_cast<int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    // Coordinate descent: re-level one value at a time against the fit of all the others.
    for (int attempt = 0; attempt < 5; ++attempt) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const auto li = static_cast<float>(levels[i]);
            float slx = sumlx - w * x[i] * li;
            if (slx > 0) {
                float sl2 = suml2 - w * li * li;
                const int new_l = clamp_level(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (new_l != levels[i]) {
                    const auto nl = static_cast<float>(new_l);
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        levels[i] = static_cast<int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (n_changed == 0) break;
    }
    for (int i = 0; i < n; ++i) levels[i] = static_cast<int8_t>(levels[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

float search_scale_and_min(int n, int nmax, const float* x, const float* weights, uint8_t* levels,
                           float* min_out, uint8_t* scratch, float rmin, float rdelta, int nstep,
                           bool use_abs_error) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        std::fill(levels, levels + n, uint8_t{0});
        *min_out = -min;
        return 0.0f;
    }
    auto error_of = [&](float scale, float offset, const uint8_t* l) {
        float total = 0;
        for (int i = 0; i < n; ++i) {
            float diff = scale * static_cast<float>(l[i]) + offset - x[i];
            diff = use_abs_error ? std::fabs(diff) : diff * diff;
            total += weights[i] * diff;
        }
        return total;
    };
    auto level_of = [&](float iscale, float value, float offset) {
        return clamp_level(nearest_int(iscale * (value - offset)), 0, nmax);
    };

    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    for (int i = 0; i < n; ++i) levels[i] = static_cast<uint8_t>(level_of(iscale, x[i], min));
    float best_error = error_of(scale, min, levels);
    if (nstep < 1) {
        *min_out = -min;
        return scale;
    }
    for (int step = 0; step <= nstep; ++step) {
        iscale =
            (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0;
        float sum_l2 = 0;
        float sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            const int l = level_of(iscale, x[i], min);
            scratch[i] = static_cast<uint8_t>(l);
            const float wl = weights[i] * static_cast<float>(l);
            sum_l += wl;
            sum_l2 += wl * static_cast<float>(l);
            sum_xl += wl * x[i];
        }
        // Weighted least squares for x ~ this_scale * l + this_min.
        const float det = sum_w * sum_l2 - sum_l * sum_l;
        if (det > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            const float error = error_of(this_scale, this_min, scratch);
            if (error < best_error) {
                std::copy(scratch, scratch + n, levels);
                best_error = error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *min_out = -min;
    return scale;
}

}  // namespace minfer::quant_detail
