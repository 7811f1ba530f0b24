// attend_group against a reference with the roundings of ggml's attention without flash-attention
// (the header states them): the query rounded to f16 for an f16 cache, exponentials within 2 ulp
// of exp (ggml's own vectorized expf), the probabilities rounded to f16 before they weigh V. Key
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
    int64_t skip = 0;  // leading keys masked (a window starting inside the first tile)
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

// out[m][d] for query head m, and the scale of its terms (sum of |p * v|) for the tolerance. The
// exponentials are taken in double; the kernel's are within 2 ulp of those.
void reference(const Case& c, const std::vector<float>& q, const Cache& cache, float scale,
               std::vector<double>& out, std::vector<double>& magnitude) {
    const int64_t n = c.n_keys, dim = c.head_dim;
    out.assign(static_cast<std::size_t>(c.group * dim), 0.0);
    magnitude.assign(out.size(), 0.0);
    for (int64_t m = 0; m < c.group; ++m) {
        std::vector<double> s(static_cast<std::size_t>(n), -INFINITY);
        for (int64_t pos = c.skip; pos < n; ++pos) {
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
        std::vector<double> e(s.size());
        for (std::size_t i = 0; i < s.size(); ++i) {
            // The score minus the maximum is a float, as in ggml; its exponential exact.
            e[i] = std::isinf(s[i]) ? 0.0
                                    : std::exp(static_cast<double>(static_cast<float>(s[i] - max)));
            sum += e[i];
        }
        for (int64_t pos = 0; pos < n; ++pos) {
            auto p = static_cast<float>(e[static_cast<std::size_t>(pos)] / sum);
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

// Runs attend_group on the case's cache (q: group x head_dim values), its tiles copied to
// separate allocations in reverse order, as blocks of a paged cache lie.
std::vector<float> attend(const Case& c, const Cache& cache, const std::vector<float>& q,
                          float scale, AttentionScratch& scratch) {
    const int64_t n_tiles = (c.n_keys + kAttentionKeyTile - 1) / kAttentionKeyTile;
    const std::size_t element = c.f16 ? 2 : 4;
    const std::size_t tile_bytes = static_cast<std::size_t>(kAttentionKeyTile * c.head_dim) * element;
    const auto* k = reinterpret_cast<const std::byte*>(c.f16 ? static_cast<const void*>(cache.k16.data())
                                                             : static_cast<const void*>(cache.k32.data()));
    const auto* v = reinterpret_cast<const std::byte*>(c.f16 ? static_cast<const void*>(cache.v16.data())
                                                             : static_cast<const void*>(cache.v32.data()));
    const std::size_t v_bytes = static_cast<std::size_t>(c.n_keys * c.head_dim) * element;
    std::vector<std::vector<std::byte>> k_copies(static_cast<std::size_t>(n_tiles)),
        v_copies(static_cast<std::size_t>(n_tiles));
    std::vector<const void*> k_tiles(static_cast<std::size_t>(n_tiles)),
        v_tiles(static_cast<std::size_t>(n_tiles));
    for (int64_t t = n_tiles - 1; t >= 0; --t) {
        const auto i = static_cast<std::size_t>(t);
        k_copies[i].assign(k + i * tile_bytes, k + (i + 1) * tile_bytes);
        v_copies[i].assign(tile_bytes, std::byte{0x7f});  // unused rows hold garbage
        const std::size_t used = std::min(tile_bytes, v_bytes - i * tile_bytes);
        std::copy(v + i * tile_bytes, v + i * tile_bytes + used, v_copies[i].begin());
        k_tiles[i] = k_copies[i].data();
        v_tiles[i] = v_copies[i].data();
    }
    std::vector<float> out(q.size(), NAN);
    AttentionGroup a;
    a.q = q.data();
    a.q_stride = c.head_dim;
    a.group = c.group;
    a.k_tiles = k_tiles.data();
    a.v_tiles = v_tiles.data();
    a.f16 = c.f16;
    a.n_keys = c.n_keys;
    a.skip = c.skip;
    a.head_dim_k = c.head_dim;
    a.head_dim_v = c.head_dim;
    a.scale = scale;
    a.out = out.data();
    a.out_stride = c.head_dim;
    attend_group(a, scratch);
    return out;
}

std::vector<float> random_queries(const Case& c, std::mt19937& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q(static_cast<std::size_t>(c.group * c.head_dim));
    for (float& x : q) x = normal(rng);
    return q;
}

TEST(Attention, MatchesTheReferenceOnEveryShape) {
    std::mt19937 rng(7);
    AttentionScratch scratch;
    int checked = 0;
    for (bool f16 : {true, false}) {
        for (int64_t n_keys : {1, 5, 16, 17, 31, 37, 100}) {
            for (int64_t group : {1, 2, 7, 8}) {
                for (int64_t head_dim : {64, 40}) {
                    // A window that starts inside the first tile masks its first keys.
                    const Case c{n_keys, group, head_dim, f16, n_keys > 7 ? group : 0};
                    const Cache cache = make_cache(c, rng);
                    const std::vector<float> q = random_queries(c, rng);
                    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
                    const std::vector<float> out = attend(c, cache, q, scale, scratch);
                    std::vector<double> want, magnitude;
                    reference(c, q, cache, scale, want, magnitude);
                    // A probability may round to the other f16 neighbour (2^-11 of itself) when
                    // its exponential is an ulp off; f32 probabilities are within a few ulp.
                    const double relative = f16 ? 0x1p-11 + 1e-5 : 1e-5;
                    for (std::size_t i = 0; i < out.size(); ++i) {
                        ASSERT_NEAR(out[i], want[i], relative * magnitude[i] + 1e-7)
                            << "f16 " << f16 << " keys " << n_keys << " group " << group
                            << " head_dim " << head_dim << " skip " << c.skip << " output " << i;
                    }
                    ++checked;
                }
            }
        }
    }
    EXPECT_EQ(checked, 2 * 7 * 4 * 2);
}

// With V the identity (key i has 1 in dimension i) the output is the probabilities themselves:
// for an f16 cache each must be an f16 value (ggml rounds them before they weigh V) within one
// f16 step of the exact softmax; for an f32 cache within a few float ulp. Sizes up to 64 keys
// cover the softmax's whole chunks of 16 and its tails.
TEST(Attention, ProbabilitiesAreRoundedLikeGgmls) {
    std::mt19937 rng(11);
    AttentionScratch scratch;
    for (bool f16 : {true, false}) {
        for (int64_t n_keys : {1, 3, 15, 16, 17, 33, 50, 64}) {
            const Case c{n_keys, 8, 64, f16};
            Cache cache = make_cache(c, rng);
            for (int64_t pos = 0; pos < n_keys; ++pos) {
                for (int64_t d = 0; d < c.head_dim; ++d) {
                    const auto row = static_cast<std::size_t>(pos * c.head_dim + d);
                    cache.v[row] = pos == d ? 1.0f : 0.0f;
                    cache.v16[row] = f32_to_f16(cache.v[row]);
                    cache.v32[row] = cache.v[row];
                }
            }
            const std::vector<float> q = random_queries(c, rng);
            const std::vector<float> out = attend(c, cache, q, 0.125f, scratch);
            // The reference's probabilities unrounded, from the same scores (the query rounded
            // as the kernel rounds it).
            Case exact = c;
            exact.f16 = false;
            std::vector<float> q_used = q;
            if (f16) {
                for (float& x : q_used) x = round_f16(x);
            }
            std::vector<double> want, magnitude;
            reference(exact, q_used, cache, 0.125f, want, magnitude);
            for (int64_t m = 0; m < c.group; ++m) {
                double total = 0;
                for (int64_t d = 0; d < c.head_dim; ++d) {
                    const auto i = static_cast<std::size_t>(m * c.head_dim + d);
                    const float p = out[i];
                    total += p;
                    if (d >= n_keys) {
                        EXPECT_EQ(p, 0.0f);
                        continue;
                    }
                    if (f16) {
                        ASSERT_EQ(p, round_f16(p)) << "keys " << n_keys << " probability " << d;
                    }
                    // One f16 step (relative, or f16's subnormal spacing), or 4 float ulp.
                    const double step = f16 ? 0x1p-10 : 0x1p-21;
                    const double floor = f16 ? 0x1p-24 : 1e-12;
                    ASSERT_NEAR(p, want[i], step * want[i] + floor)
                        << "f16 " << f16 << " keys " << n_keys << " probability " << d;
                }
                EXPECT_NEAR(total, 1.0, f16 ? 1e-3 : 1e-5);
            }
        }
    }
}

}  // namespace
}  // namespace minfer
