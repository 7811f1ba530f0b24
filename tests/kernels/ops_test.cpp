// Transformer ops against straightforward double-precision references, with tolerances from
// the f32 (or f16, for GELU's table) roundings involved; get_rows and the f16 conversions
// against ggml's own bytes in the quant fixture.

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/fixtures.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "kernels/kernel_path.h"
#include "kernels/ops.h"

namespace minfer {
namespace {

constexpr double kF32 = 0x1p-24;  // unit roundoff of f32

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = normal(rng);
    return v;
}

TEST(Ops, RmsNormMatchesDoubleReference) {
    for (int64_t n : {1, 7, 64, 896, 4097}) {
        const std::vector<float> x = random_row(n, static_cast<uint32_t>(n), 3.0f);
        const std::vector<float> w = random_row(n, 99, 1.0f);
        std::vector<float> y(x.size()), y_plain(x.size());
        const float eps = 1e-6f;
        rms_norm(x.data(), w.data(), y.data(), n, eps);
        rms_norm(x.data(), nullptr, y_plain.data(), n, eps);
        double sum = 0;
        for (float v : x) sum += static_cast<double>(v) * v;
        const double scale = 1.0 / std::sqrt(sum / static_cast<double>(n) + eps);
        for (int64_t i = 0; i < n; ++i) {
            const double ref = x[i] * scale;
            // scale is off by a few roundings (mean, sqrt, division), then one or two products.
            EXPECT_NEAR(y_plain[i], ref, 8 * kF32 * std::fabs(ref)) << i;
            EXPECT_NEAR(y[i], ref * w[i], 10 * kF32 * std::fabs(ref * w[i])) << i;
        }
    }
    std::vector<float> x = random_row(128, 5);
    const std::vector<float> copy = x;
    rms_norm(x.data(), nullptr, x.data(), 128, 1e-5f);  // in place
    std::vector<float> y(128);
    rms_norm(copy.data(), nullptr, y.data(), 128, 1e-5f);
    EXPECT_EQ(x, y);
}

// theta_i = pos * freq_scale * base^(-2i / n_dims) in double; the f32 computation multiplies
// theta_scale in i times, so its angle is off by about (i + 2) f32 roundings relative.
void check_rope(RopeStyle style, int64_t head_dim, int64_t n_dims, float base, float freq_scale) {
    const int64_t n_heads = 3;
    const std::vector<int32_t> positions = {0, 1, 7, 100, 4000, 32767};
    const auto n_tokens = static_cast<int64_t>(positions.size());
    const std::vector<float> x = random_row(n_tokens * n_heads * head_dim, 17);
    std::vector<float> y = x;
    rope(y.data(), n_tokens, n_heads, positions, {style, head_dim, n_dims, base, freq_scale});
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t h = 0; h < n_heads; ++h) {
            const float* in = x.data() + (t * n_heads + h) * head_dim;
            const float* out = y.data() + (t * n_heads + h) * head_dim;
            for (int64_t i = 0; i < n_dims / 2; ++i) {
                const int64_t a = style == RopeStyle::kNormal ? 2 * i : i;
                const int64_t b = style == RopeStyle::kNormal ? 2 * i + 1 : i + n_dims / 2;
                const double angle = positions[t] * static_cast<double>(freq_scale) *
                                     std::pow(static_cast<double>(base), -2.0 * i / n_dims);
                const double ref_a = in[a] * std::cos(angle) - in[b] * std::sin(angle);
                const double ref_b = in[a] * std::sin(angle) + in[b] * std::cos(angle);
                const double tol = (std::fabs(in[a]) + std::fabs(in[b])) *
                                   (std::fabs(angle) * (i + 3) * 2 * kF32 + 16 * kF32);
                EXPECT_NEAR(out[a], ref_a, tol) << "pos " << positions[t] << " pair " << i;
                EXPECT_NEAR(out[b], ref_b, tol) << "pos " << positions[t] << " pair " << i;
            }
            for (int64_t i = n_dims; i < head_dim; ++i) EXPECT_EQ(out[i], in[i]);  // untouched
        }
    }
}

TEST(Ops, RopeNormalAndNeoxMatchDoubleReference) {
    check_rope(RopeStyle::kNormal, 64, 64, 10000.0f, 1.0f);
    check_rope(RopeStyle::kNeox, 64, 64, 1000000.0f, 1.0f);
    check_rope(RopeStyle::kNormal, 128, 64, 10000.0f, 0.25f);  // partial rotation, linear scaling
    check_rope(RopeStyle::kNeox, 80, 32, 500000.0f, 0.5f);
}

TEST(Ops, RopeRejectsBadConfig) {
    std::vector<float> x(64);
    const std::vector<int32_t> pos = {0};
    EXPECT_THROW(rope(x.data(), 1, 1, pos, {RopeStyle::kNormal, 64, 65, 1e4f, 1}), UsageError);
    EXPECT_THROW(rope(x.data(), 1, 1, pos, {RopeStyle::kNormal, 64, 63, 1e4f, 1}), UsageError);
    EXPECT_THROW(rope(x.data(), 2, 1, pos, {RopeStyle::kNormal, 32, 32, 1e4f, 1}), UsageError);
}

// Every op runs its SIMD version by default; the exp-based ones also have a scalar one.
class OpsOnPath : public ::testing::TestWithParam<KernelPath> {
  protected:
    void SetUp() override { set_kernel_path(GetParam()); }
    void TearDown() override { set_kernel_path(KernelPath::kBest); }
};

// Over more values than one internal chunk, with a tail; all -inf gives -inf.
TEST_P(OpsOnPath, LogSumExp) {
    const int64_t n = 2500;
    const std::vector<float> x = random_row(n, 9, 8.0f);
    double max = -INFINITY, sum = 0;
    for (const float v : x) max = std::fmax(max, v);
    for (const float v : x) sum += std::exp(static_cast<double>(v) - max);
    EXPECT_NEAR(logsumexp(x.data(), n), max + std::log(sum), 1e-5);
    const std::vector<float> none(5, -INFINITY);
    EXPECT_EQ(logsumexp(none.data(), 5), -INFINITY);
}

// Every position of a match: in the first vectors, in a block of four, in the tail; the first of
// several; none; NaN never matches; the threshold itself does not.
TEST_P(OpsOnPath, FirstAbove) {
    for (const int64_t n : {0, 1, 15, 16, 63, 64, 65, 200}) {
        std::vector<float> x(static_cast<std::size_t>(n), 1.0f);
        EXPECT_EQ(first_above(x.data(), n, 1.0f), n) << n;
        for (int64_t at = 0; at < n; ++at) {
            x[at] = std::nanf("");
            EXPECT_EQ(first_above(x.data(), n, 1.0f), n) << n << " nan at " << at;
            x[at] = 1.5f;
            if (at + 1 < n) x[n - 1] = 2.0f;  // a later match does not hide the first
            EXPECT_EQ(first_above(x.data(), n, 1.0f), at) << n << " at " << at;
            x.assign(x.size(), 1.0f);
        }
    }
}

// The vector path adds the double squares in another order: the f32 results stay within an ulp of
// the sequential sum's.
TEST_P(OpsOnPath, RmsNormAgreesWithTheSequentialSum) {
    for (const int64_t n : {1, 17, 896, 4864}) {
        const std::vector<float> x = random_row(n, static_cast<uint32_t>(n) + 1, 2.0f);
        std::vector<float> y(x.size());
        rms_norm(x.data(), nullptr, y.data(), n, 1e-6f);
        double sum = 0.0;
        for (const float v : x) sum += static_cast<double>(v * v);
        const float scale =
            1.0f / std::sqrt(static_cast<float>(sum / static_cast<double>(n)) + 1e-6f);
        for (int64_t i = 0; i < n; ++i) {
            EXPECT_NEAR(y[i], x[i] * scale, 2 * kF32 * std::fabs(x[i] * scale)) << n << " " << i;
        }
    }
}

TEST_P(OpsOnPath, SoftmaxWithMaskAndScale) {
    const int64_t n = 37;
    const std::vector<float> x = random_row(n, 3, 4.0f);
    std::vector<float> mask(static_cast<std::size_t>(n), 0.0f);
    for (int64_t i = 20; i < n; ++i) mask[i] = -INFINITY;  // causal-style mask
    mask[3] = -2.5f;                                       // additive bias
    std::vector<float> y = x;
    const float scale = 0.125f;
    softmax(y.data(), n, scale, mask.data());
    double max = -INFINITY, sum = 0;
    std::vector<double> z(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        z[i] = static_cast<double>(x[i]) * scale + mask[i];
        max = std::fmax(max, z[i]);
    }
    for (double v : z) sum += std::exp(v - max);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
        const double ref = std::exp(z[i] - max) / sum;
        EXPECT_NEAR(y[i], ref, 16 * kF32 * ref + 1e-30) << i;
        if (i >= 20) {
            EXPECT_EQ(y[i], 0.0f);
        }
        total += y[i];
    }
    EXPECT_NEAR(total, 1.0, 1e-5);

    std::vector<float> all_masked(4, 1.0f);
    std::vector<float> minus_inf(4, -INFINITY);
    softmax(all_masked.data(), 4, 1.0f, minus_inf.data());
    for (float v : all_masked) EXPECT_EQ(v, 0.0f);
}

TEST_P(OpsOnPath, ActivationsMatchDoubleReference) {
    std::vector<float> x = random_row(2000, 11, 4.0f);
    x.insert(x.end(), {0.0f, -0.0f, -9.99f, -10.0f, -12.0f, 9.99f, 10.0f, 30.0f, -80.0f, 80.0f,
                       1e-6f, -3e-5f});
    const auto n = static_cast<int64_t>(x.size());
    const std::vector<float> up = random_row(n, 12);
    std::vector<float> s(x.size()), g(x.size()), sw(x.size());
    silu(x.data(), s.data(), n);
    gelu(x.data(), g.data(), n);
    swiglu(x.data(), up.data(), sw.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        const double v = x[i];
        const double silu_ref = v / (1.0 + std::exp(-v));
        EXPECT_NEAR(s[i], silu_ref, 8 * kF32 * std::fabs(silu_ref) + 1e-37) << v;
        EXPECT_NEAR(sw[i], silu_ref * up[i], 10 * kF32 * std::fabs(silu_ref * up[i]) + 1e-37) << v;
        const double gelu_ref =
            0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * v * (1.0 + 0.044715 * v * v)));
        // ggml rounds x to f16 (|dx| <= |x| 2^-11 + 2^-25; |gelu'| < 1.13), looks up a value
        // rounded to f16 (|y| 2^-11 + 2^-25), and clamps to 0 / x beyond -10 / 10.
        const double tol = std::fabs(v) >= 10.0 ? std::fabs(gelu_ref - (v > 0 ? v : 0.0)) + 1e-30
                                                : 1.13 * (std::fabs(v) * 0x1p-11 + 0x1p-25) +
                                                      std::fabs(gelu_ref) * 0x1p-11 + 0x1p-25;
        EXPECT_NEAR(g[i], gelu_ref, tol) << v;
    }
}

// Gemma 2's final logits: 30 * tanh(x / 30) within 8 ulp of the C library's on both paths,
// across the saturation (|x| / 30 > 9: exactly +-30), zeros, tiny values and a tail.
TEST_P(OpsOnPath, SoftCapRowMatchesTheScalarSoftCap) {
    std::vector<float> x = random_row(1001, 13, 120.0f);
    x.insert(x.end(), {0.0f, -0.0f, 1e-30f, -1e-6f, 29.9f, 300.0f, -300.0f, 1e6f, -1e6f});
    std::vector<float> y = x;
    soft_cap_row(y.data(), static_cast<int64_t>(y.size()), 30.0f);
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float expected = soft_cap(x[i], 30.0f);
        EXPECT_NEAR(y[i], expected, 8 * kF32 * std::fabs(expected) + 1e-37) << x[i];
        EXPECT_EQ(std::signbit(y[i]), std::signbit(expected)) << x[i];
        EXPECT_LE(std::fabs(y[i]), 30.0f) << x[i];
    }
}

INSTANTIATE_TEST_SUITE_P(Paths, OpsOnPath,
                         ::testing::Values(KernelPath::kBest, KernelPath::kScalar),
                         [](const auto& param_info) {
                             return param_info.param == KernelPath::kBest ? "simd" : "scalar";
                         });

// The vector lookups of gelu's table (F16C rounding, gathers) give the scalar lookups' bits: a
// sweep over [-12, 12] across both cut-offs, the halves' rounding ties, subnormals and signed zero.
TEST(Ops, GeluVectorPathGivesTheTablesBits) {
    std::vector<float> x;
    for (int i = -120000; i <= 120000; ++i) x.push_back(static_cast<float>(i) * 1e-4f);
    for (const float v : {-10.0f, 10.0f, -0.0f, 1e-8f, -3e-5f, 6.1035156e-05f, 1.00048828125f,
                          9.99f, -9.99f, 65504.0f, -1e30f})
        x.push_back(v);
    std::vector<float> simd(x.size()), scalar(x.size());
    gelu(x.data(), simd.data(), static_cast<int64_t>(x.size()));
    set_kernel_path(KernelPath::kScalar);
    gelu(x.data(), scalar.data(), static_cast<int64_t>(x.size()));
    set_kernel_path(KernelPath::kBest);
    for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_EQ(std::bit_cast<uint32_t>(simd[i]), std::bit_cast<uint32_t>(scalar[i]))
            << "gelu(" << x[i] << ")";
    }
}

TEST(Ops, AddAndMul) {
    const std::vector<float> a = random_row(333, 1), b = random_row(333, 2);
    std::vector<float> sum(a.size()), prod(a.size());
    add(a.data(), b.data(), sum.data(), 333);
    mul(a.data(), b.data(), prod.data(), 333);
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(sum[i], static_cast<float>(static_cast<double>(a[i]) + b[i]));
        EXPECT_EQ(prod[i], static_cast<float>(static_cast<double>(a[i]) * b[i]));
    }
}

TEST(Ops, GetRowsReproducesGgmlDequantizationForEveryType) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const GgufFile file = GgufFile::open(path);
    const std::vector<int32_t> ids = {3, 0, 15, 3, 1};
    for (const TensorInfo* t : file.tensors()) {
        if (t->name.rfind("q.", 0) != 0 && t->name != "src") continue;
        const TensorInfo& deq = t->name == "src" ? *t : file.tensor("deq." + t->name.substr(2));
        const WeightMatrix table{t->type, t->ne[0], t->ne[1], t->data};
        std::vector<float> out(ids.size() * static_cast<std::size_t>(t->ne[0]));
        get_rows(table, ids, out.data());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const auto* ref = reinterpret_cast<const float*>(deq.data.data()) + ids[i] * t->ne[0];
            EXPECT_EQ(std::memcmp(out.data() + i * t->ne[0], ref, t->ne[0] * sizeof(float)), 0)
                << t->name << " row " << ids[i];
        }
    }
}

TEST(Ops, GetRowsRejectsBadIds) {
    std::vector<std::byte> data(4 * 32 * sizeof(float));
    const WeightMatrix table{GgmlType::F32, 32, 4, data};
    std::vector<float> out(32);
    const std::vector<int32_t> negative = {-1}, too_big = {4};
    EXPECT_THROW(get_rows(table, negative, out.data()), UsageError);
    EXPECT_THROW(get_rows(table, too_big, out.data()), UsageError);
    const WeightMatrix short_table{GgmlType::F32, 32, 5, data};
    const std::vector<int32_t> ok = {0};
    EXPECT_THROW(get_rows(short_table, ok, out.data()), UsageError);
}

TEST(Ops, F16ConversionsMatchGgmlBytes) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const GgufFile file = GgufFile::open(path);
    const TensorInfo& src = file.tensor("src");
    const TensorInfo& q = file.tensor("q.f16");
    const TensorInfo& deq = file.tensor("deq.f16");
    const int64_t n = src.n_elements();
    std::vector<uint16_t> half(static_cast<std::size_t>(n));
    std::vector<float> back(static_cast<std::size_t>(n));
    convert_f32_to_f16(reinterpret_cast<const float*>(src.data.data()), half.data(), n);
    convert_f16_to_f32(half.data(), back.data(), n);
    EXPECT_EQ(std::memcmp(half.data(), q.data.data(), static_cast<std::size_t>(n) * 2), 0);
    EXPECT_EQ(std::memcmp(back.data(), deq.data.data(), static_cast<std::size_t>(n) * 4), 0);
}

}  // namespace
}  // namespace minfer
