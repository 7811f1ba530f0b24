#include "model/rope_table.h"

#include <cmath>

namespace minfer {

void RopeTable::prepare(const HParams& hp, RopeKind kind, const Weight& freq_factors,
                        std::span<const int32_t> positions) {
    kind_ = kind;
    n_rot_ = hp.n_rot;
    cos_sin_.resize(positions.size() * static_cast<std::size_t>(n_rot_));
    const float theta_scale = std::pow(hp.rope_freq_base, -2.0f / static_cast<float>(n_rot_));
    const float* factors = freq_factors ? freq_factors.f32() : nullptr;
    for (std::size_t t = 0; t < positions.size(); ++t) {
        float* cs = cos_sin_.data() + t * static_cast<std::size_t>(n_rot_);
        float theta = static_cast<float>(positions[t]);
        for (int64_t i = 0; i < n_rot_; i += 2) {
            const float factor = factors ? factors[i / 2] : 1.0f;
            const float angle = hp.rope_freq_scale * (theta / factor);
            cs[i] = std::cos(angle);
            cs[i + 1] = std::sin(angle);
            theta *= theta_scale;
        }
    }
}

void RopeTable::apply(float* x, int64_t t) const {
    const float* cs = cos_sin_.data() + t * n_rot_;
    if (kind_ == RopeKind::Normal) {
        for (int64_t i = 0; i < n_rot_; i += 2) {
            const float x0 = x[i], x1 = x[i + 1];
            x[i] = x0 * cs[i] - x1 * cs[i + 1];
            x[i + 1] = x0 * cs[i + 1] + x1 * cs[i];
        }
    } else {
        const int64_t half = n_rot_ / 2;
        for (int64_t i = 0; i < n_rot_; i += 2) {
            float& a = x[i / 2];
            float& b = x[i / 2 + half];
            const float x0 = a, x1 = b;
            a = x0 * cs[i] - x1 * cs[i + 1];
            b = x0 * cs[i + 1] + x1 * cs[i];
        }
    }
}

}  // namespace minfer
