// attend_group against a reference that rounds where ggml's attention without flash-attention
// rounds (the header states it): the query to f16 for an f16 cache, each exponential (taken in
// double) to float, the probabilities to float and then to f16 before they weigh V; the weighted
// sum is taken in double. Key
// counts cover partial K tiles and softmax tails (1 to 100 keys), groups of 1 to 8 heads, and a
// head size that is not a whole number of vectors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/attention.h"

namespace minfer {
namespace {

struct Case {
    int64_t n_keys, group, head_dim;
    bool f16;
};

float round_f16(float x) {
    return f16_to_f32(f32_to_f16(x));
}

// The cache holds values exactly representable in its type; `k`/`v` are those values as floats.
struct Cache {
    std::vector<uint16_t> k16, v16;
    std::vector<float> k32, v32, k, v;  // k, v: [pos][d]
};

Cache make_cache(const Case& c, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t tiles = (c.n_keys + kAttentionKeyTile - 1) / kAttentionKeyTile;
    const auto tile_values = static_cast<std::size_t>(tiles * kAttentionKeyTile * c.head_dim);
    const auto row_values = static_cast<std::size_t>(c.n_keys * c.head_dim);
    Cache cache;
    cache.k.resize(row_values);
    cache.v.resize(row_values);
    cache.k16.assign(tile_values, 0);
    cache.k32.assign(tile_values, 0.0f);
    cache.v16.resize(row_values);
    cache.v32.resize(row_values);
    for (int64_t pos = 0; pos < c.n_keys; ++pos) {
        for (int64_t d = 0; d < c.head_dim; ++d) {
            const auto row = static_cast<std::size_t>(pos * c.head_dim + d);
            const auto tiled = static_cast<std::size_t>((pos / kAttentionKeyTile * c.head_dim + d) *
                                                            kAttentionKeyTile +
                                                        pos % kAttentionKeyTile);
            float kv = 2.0f * normal(rng), vv = normal(rng);
            if (c.f16) {
                kv = round_f16(kv);
                vv = round_f16(vv);
            }
            cache.k[row] = kv;
            cache.v[row] = vv;
            cache.k16[tiled] = f32_to_f16(kv);
            cache.k32[tiled] = kv;
            cache.v16[row] = f32_to_f16(vv);
            cache.v32[row] = vv;
        }
    }
    return cache;
}

// out[m][d] for query head m, and the scale of its terms (sum of |p * v|) for the tolerance.
void reference(const Case& c, const std::vector<float>& q, const Cache& cache, float scale,
               std::vector<double>& out, std::vector<double>& magnitude) {
    const int64_t n = c.n_keys, dim = c.head_dim;
    out.assign(static_cast<std::size_t>(c.group * dim), 0.0);
    magnitude.assign(out.size(), 0.0);
    for (int64_t m = 0; m < c.group; ++m) {
        std::vector<double> s(static_cast<std::size_t>(n));
        for (int64_t pos = 0; pos < n; ++pos) {
            // The kernel's own chain of float multiply-adds, so that both see the same scores
            // (a score one float step apart can round a probability to the other f16 neighbour).
            float dot = 0.0f;
            for (int64_t d = 0; d < dim; ++d) {
                float qv = q[static_cast<std::size_t>(m * dim + d)];
                if (c.f16) qv = round_f16(qv);
                dot = std::fma(qv, cache.k[static_cast<std::size_t>(pos * dim + d)], dot);
            }
            s[static_cast<std::size_t>(pos)] = static_cast<double>(dot * scale);
        }
        double max = -INFINITY, sum = 0;
        for (double x : s) max = std::max(max, x);
        std::vector<float> e(s.size());
        for (std::size_t i = 0; i < s.size(); ++i) {
            e[i] =
                static_cast<float>(std::exp(static_cast<double>(static_cast<float>(s[i] - max))));
            sum += e[i];
        }
        const auto inv = static_cast<float>(1.0 / sum);
        for (int64_t pos = 0; pos < n; ++pos) {
            float p = e[static_cast<std::size_t>(pos)] * inv;
            if (c.f16) p = round_f16(p);
            for (int64_t d = 0; d < dim; ++d) {
                const double term =
                    static_cast<double>(p) * cache.v[static_cast<std::size_t>(pos * dim + d)];
                out[static_cast<std::size_t>(m * dim + d)] += term;
                magnitude[static_cast<std::size_t>(m * dim + d)] += std::fabs(term);
            }
        }
    }
}

TEST(Attention, MatchesGgmlsRoundingsOnEveryShape) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    AttentionScratch scratch;
    int checked = 0;
    for (bool f16 : {true, false}) {
        for (int64_t n_keys : {1, 5, 16, 17, 31, 37, 100}) {
            for (int64_t group : {1, 2, 7, 8}) {
                for (int64_t head_dim : {64, 40}) {
                    const Case c{n_keys, group, head_dim, f16};
                    const Cache cache = make_cache(c, rng);
                    std::vector<float> q(static_cast<std::size_t>(group * head_dim));
                    for (float& x : q) x = normal(rng);
                    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
                    std::vector<float> out(q.size(), NAN);
                    AttentionGroup a;
                    a.q = q.data();
                    a.q_stride = head_dim;
                    a.group = group;
                    a.k_tiles = f16 ? static_cast<const void*>(cache.k16.data())
                                    : static_cast<const void*>(cache.k32.data());
                    a.v_rows = f16 ? static_cast<const void*>(cache.v16.data())
                                   : static_cast<const void*>(cache.v32.data());
                    a.f16 = f16;
                    a.n_keys = n_keys;
                    a.head_dim_k = head_dim;
                    a.head_dim_v = head_dim;
                    a.scale = scale;
                    a.out = out.data();
                    a.out_stride = head_dim;
                    attend_group(a, scratch);

                    std::vector<double> want, magnitude;
                    reference(c, q, cache, scale, want, magnitude);
                    for (std::size_t i = 0; i < out.size(); ++i) {
                        // Float sums of at most 100 terms; a probability left unrounded to f16
                        // moves its term by up to 2^-12 of itself.
                        ASSERT_NEAR(out[i], want[i], 4e-6 * magnitude[i] + 1e-7)
                            << "f16 " << f16 << " keys " << n_keys << " group " << group
                            << " head_dim " << head_dim << " output " << i;
                    }
                    ++checked;
                }
            }
        }
    }
    EXPECT_EQ(checked, 2 * 7 * 4 * 2);
}

}  // namespace
}  // namespace minfer
