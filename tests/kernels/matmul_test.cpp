// matmul against ggml's own dequantization (from the fixture), for every weight type, every
// kernel path this machine has (scalar reference, each Highway target, AVX-512 with and without
// VNNI), GEMV and GEMM, and shapes that do not divide the tiles.
//
// Tolerance. matmul multiplies the weights exactly as stored but first rounds x to the
// activation type, as ggml does; the reference multiplies ggml's dequantized weights with the
// unrounded x in double. So the difference is sum_i w_i * (xq_i - x_i) plus float rounding:
//   * Q8_0 / Q8_1 (blocks of 32): d = amax / 127 is stored as f16, and q = round(x * 127 / amax),
//     so |xq_i - x_i| <= e = d * (0.5 + 127 * 2^-11) (half a step, plus 127 steps of the f16
//     rounding of d). Q8_1's block sum s is also rounded to f16 and multiplies the block's
//     offset m: at most |m| * 4.1 d more, with |m| <= max |w_i| of the block (m is the value of
//     the block's q = 0).
//   * Q8_K (blocks of 256): d = amax / 127 in f32, |xq_i - x_i| <= d / 2 (times 1.001).
//   * F16 / BF16: |xq_i - x_i| <= |x_i| * 2^-11 / 2^-8; F32: exact.
//   * Float rounding of the kernels' sums: 2^-16 * sum |w_i x_i|.
// Every output must be within that worst case. The worst case is loose (errors cancel), so the
// root mean square error over all outputs must also stay below 2x its expected value under
// rounding noise (independent, uniform over one step: variance step^2 / 12 per element).
// Finally each SIMD path must agree with the scalar reference (same quantized activations) to
// float rounding: 2^-13 * sum |w_i x_i|.
//
// MatmulMode::kBatchInvariant is checked twice: against the same reference on every path (it
// runs the GEMM panel arithmetic for every token count), and for bit-identical outputs: a token's
// row of y must have the same bits whether it is alone or in a batch of 2-20 or 33 tokens, at any
// place in it, on 1, 2 or 3 threads.
//
// Weights in the interleaved layout (kernels/packed_layout.h, WeightMatrix::packed) are one more
// variant of every path ("-packed"): against the same reference, and bit for bit equal to the
// file's layout in the batch-invariant mode on the same path (in both modes: interleaved weights
// always take the GEMM's arithmetic); paths without kernels for them read the file's layout.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "hwy/targets.h"
#include "kernels/activation_quant.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"
#include "quant/quantize.h"
#include "quant_fixture.h"

namespace minfer {
namespace {

using test::TestMatrix;

struct Path {
    std::string name;
    int64_t hwy_target;  // 0 for the scalar reference
    bool extensions;
    MatmulMode mode = MatmulMode::kGemvForOneToken;
    bool packed = false;  // the interleaved weights attached
    bool x86_prefetch = software_prefetch_pays();  // the x86 packed kernels' prefetches
    ArmExtensions arm_limit = ArmExtensions::kI8mm;   // aarch64: the extensions allowed
    bool arm_sve = true;                               // aarch64: SVE's integer kernels allowed
};

// Every kernel path of this machine (each once more in the batch-invariant mode with `invariant`,
// and all of them once more with the interleaved weights with `packed`, AVX2 and AVX-512 with
// both choices of prefetches).
std::vector<Path> kernel_paths(bool invariant = false, bool packed = false) {
    std::vector<Path> paths = {{"scalar", 0, true}};
    auto add = [&](const std::string& name, int64_t target, bool extensions) {
        paths.push_back({name, target, extensions});
        if (invariant) {
            paths.push_back({name + "-invariant", target, extensions, MatmulMode::kBatchInvariant});
        }
    };
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
        add(hwy::TargetName(target), target, true);
        if (target == HWY_AVX3 && x86_vnni_available()) add("AVX3-without-VNNI", target, false);
    }
    // aarch64: the matmul kernels run on NEON whatever the best target; SVE's integer kernels
    // where the CPU has 256- or 512-bit SVE, and each extension the CPU has, are also switched off
    // in turn (SVE, then i8mm, then sdot: the portable loops).
    const auto add_arm = [&](const std::string& name, ArmExtensions cap) {
        add(name, HWY_NEON, true);
        for (std::size_t i = paths.size() - (invariant ? 2 : 1); i < paths.size(); ++i) {
            paths[i].arm_limit = cap;
            paths[i].arm_sve = false;
        }
    };
    if (arm_sve_kernel_bits() != 0) add_arm("NEON-without-SVE", arm_extensions());
    if (arm_extensions() != ArmExtensions::kNone) {
        for (int limit = static_cast<int>(arm_extensions()) - 1; limit >= 0; --limit) {
            const auto cap = static_cast<ArmExtensions>(limit);
            add_arm(cap == ArmExtensions::kNone ? "NEON-without-DOTPROD" : "NEON-without-I8MM",
                    cap);
        }
    }
    if (packed) {
        const std::size_t n = paths.size();
        for (std::size_t i = 0; i < n; ++i) {
            Path p = paths[i];
            p.name += "-packed";
            p.packed = true;
            paths.push_back(p);
            // The x86 packed kernels' other prefetch choice.
            if (p.hwy_target == HWY_AVX2 || p.hwy_target == HWY_AVX3) {
                p.x86_prefetch = !p.x86_prefetch;
                p.name += p.x86_prefetch ? "-prefetch" : "-no-prefetch";
                paths.push_back(p);
            }
        }
    }
    return paths;
}

void select_path(const Path& path) {
    set_kernel_path(path.hwy_target == 0 ? KernelPath::kScalar : KernelPath::kBest);
    hwy::SetSupportedTargetsForTest(path.hwy_target);
    set_x86_extensions_enabled(path.extensions);
    set_x86_software_prefetch(path.x86_prefetch);
    set_arm_extensions_limit(path.arm_limit);
    set_arm_sve_kernels_enabled(path.arm_sve);
}

void reset_path() {
    set_kernel_path(KernelPath::kBest);
    hwy::SetSupportedTargetsForTest(0);
    set_x86_extensions_enabled(true);
    set_x86_software_prefetch(software_prefetch_pays());
    set_arm_extensions_limit(ArmExtensions::kI8mm);
    set_arm_sve_kernels_enabled(true);
}

std::vector<float> make_activations(int64_t n_tokens, int64_t n_cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n_tokens * n_cols));
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = normal(rng);
        if (i % 509 == 5) x[i] *= 6.0f;    // rare outliers, as real activations have
        if (i % 211 < 32) x[i] *= 0.001f;  // some nearly-zero blocks
    }
    return x;
}

// Per-element bound and noise step of the activation rounding (see the header comment).
struct ActivationError {
    std::vector<double> bound;    // |xq_i - x_i| <= bound[i]
    std::vector<double> step;     // rounding step at i (noise variance step^2 / 12)
    std::vector<double> block_d;  // Q8_1 only: d of the block of each element
};

ActivationError activation_error(GgmlType weight_type, const float* x, int64_t n) {
    ActivationError e;
    e.bound.resize(static_cast<std::size_t>(n));
    e.step.resize(static_cast<std::size_t>(n));
    const GgmlType act = activation_type(weight_type);
    if (act == GgmlType::F32 || act == GgmlType::F16 || act == GgmlType::BF16) {
        const double rel = act == GgmlType::F32 ? 0.0 : act == GgmlType::F16 ? 0x1p-11 : 0x1p-8;
        for (int64_t i = 0; i < n; ++i) {
            e.bound[i] = std::fabs(x[i]) * rel;
            e.step[i] = 2.0 * e.bound[i];
        }
        return e;
    }
    const int64_t block = act == GgmlType::Q8_K ? 256 : 32;
    if (act == GgmlType::Q8_1) e.block_d.resize(static_cast<std::size_t>(n));
    for (int64_t b = 0; b < n; b += block) {
        double amax = 0.0;
        for (int64_t i = b; i < b + block; ++i) amax = std::fmax(amax, std::fabs(x[i]));
        const double d = amax / 127.0;
        const double bound =
            act == GgmlType::Q8_K ? d * 0.5 * 1.001 : d * (0.5 + 127.0 * 0x1p-11) * 1.001;
        for (int64_t i = b; i < b + block; ++i) {
            e.bound[i] = bound;
            e.step[i] = d;
            if (!e.block_d.empty()) e.block_d[i] = d;
        }
    }
    return e;
}

struct Reference {
    std::vector<double> value, worst, variance, abs_sum;  // [n_tokens][n_rows]
};

Reference reference(const TestMatrix& m, const std::vector<float>& x, int64_t n_tokens) {
    Reference ref;
    const auto outputs = static_cast<std::size_t>(n_tokens * m.n_rows);
    ref.value.resize(outputs);
    ref.worst.resize(outputs);
    ref.variance.resize(outputs);
    ref.abs_sum.resize(outputs);
    for (int64_t t = 0; t < n_tokens; ++t) {
        const float* xt = x.data() + t * m.n_cols;
        const ActivationError e = activation_error(m.type, xt, m.n_cols);
        for (int64_t r = 0; r < m.n_rows; ++r) {
            const float* w = m.values.data() + r * m.n_cols;
            double sum = 0, worst = 0, variance = 0, abs_sum = 0, block_max_w = 0;
            for (int64_t i = 0; i < m.n_cols; ++i) {
                const double wi = w[i];
                sum += wi * xt[i];
                abs_sum += std::fabs(wi * xt[i]);
                worst += std::fabs(wi) * e.bound[i];
                variance += wi * wi * e.step[i] * e.step[i] / 12.0;
                if (!e.block_d.empty()) {
                    block_max_w = std::fmax(block_max_w, std::fabs(wi));
                    if (i % 32 == 31) {
                        worst += block_max_w * 4.1 * e.block_d[i];
                        block_max_w = 0;
                    }
                }
            }
            const std::size_t o = static_cast<std::size_t>(t * m.n_rows + r);
            ref.value[o] = sum;
            ref.worst[o] = worst + 0x1p-16 * abs_sum + 1e-30;
            ref.variance[o] = variance;
            ref.abs_sum[o] = abs_sum;
        }
    }
    return ref;
}

// Checks that y ([n_tokens][rows]) holds, bit for bit, the rows of `alone` ([n][rows], token t
// computed by itself, or whatever `expected` names); reports the first difference.
void expect_same_bits(const std::vector<float>& y, const std::vector<float>& alone,
                      int64_t n_tokens, int64_t rows, const std::string& what,
                      const char* got = "in the batch", const char* expected = "alone") {
    const std::size_t bytes = static_cast<std::size_t>(n_tokens * rows) * sizeof(float);
    if (std::memcmp(y.data(), alone.data(), bytes) == 0) return;
    for (std::size_t o = 0; o < static_cast<std::size_t>(n_tokens * rows); ++o) {
        if (std::memcmp(&y[o], &alone[o], sizeof(float)) != 0) {
            ADD_FAILURE() << what << ": token " << o / static_cast<std::size_t>(rows) << " row "
                          << o % static_cast<std::size_t>(rows) << " is " << y[o] << " " << got
                          << " but " << alone[o] << " " << expected;
            return;
        }
    }
}

// True where the interleaved weights take kernels of their own: the AVX-512 path (with or without
// VNNI), the AVX2 one and aarch64's NEON (with each of its dot products). Elsewhere matmul reads
// the file's layout and the equality is trivial.
bool kernels_have_packed(const Path& p, GgmlType type) {
    return (p.hwy_target == HWY_AVX3 || p.hwy_target == HWY_AVX2 || p.hwy_target == HWY_NEON) &&
           kernels::has_packed_layout(type);
}

struct Shape {
    int64_t rows, tokens, cols;
};

// Shapes that do not divide the 16-row panels or the 8/4/2-token tiles: 1, 7 and 4097 rows,
// batches of 1, 2, 17 and 67; and rows of 32-value blocks that do not divide the GEMV's chunks
// of 8 blocks and pairs: 7, 9 and 27 blocks.
const std::vector<Shape>& shapes() {
    static const std::vector<Shape> s = {
        {1, 1, 512},
        {7, 1, 512},
        {4097, 1, 256},
        {1, 2, 512},
        {7, 2, 768},
        {4097, 2, 256},
        {7, 17, 512},
        {33, 17, 512},
        {4097, 17, 256},
        {1, 67, 256},
        {7, 67, 512},
        {33, 67, 256},
        {7, 1, 224},
        {5, 1, 864},
        {3, 2, 288},
        {17, 17, 864},
        // longer than the chunks of columns the small-batch GEMM unpacks at a time
        {21, 1, 2304},
        {37, 3, 2304},
        // the interleaved kernels' runs of 4 tokens, and their switch to panels at 32 tokens
        {19, 5, 512},
        {9, 12, 256},
        {23, 32, 256},
        // several stripes of the interleaved layout under a tile of 8 tokens and a panel
        {17, 9, 2304},
        {5, 32, 2304},
        // several bands of several stripes, the last band shorter (packed_layout.h)
        {149, 1, 4608},
        {149, 33, 4608},
        // float weights: bands of 9 groups, each ending in a quad of one (packed_layout.h)
        {149, 1, 224},
        {149, 5, 224}};
    return s;
}

class MatmulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulTest, AgreesWithGgmlDequantizationOnEveryPath) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const test::QuantFixture fixture(path.string());
    const GgmlType type = GetParam();
    ThreadPool pool(2);
    MatmulScratch scratch;
    const std::vector<Path> paths =
        kernel_paths(/*invariant=*/true, /*packed=*/kernels::has_packed_layout(type));

    for (const Shape& shape : shapes()) {
        if (shape.cols % std::max<int64_t>(32, block_size(type)) != 0) continue;
        TestMatrix m = fixture.make_matrix(type, shape.rows, shape.cols);
        if (kernels::has_packed_layout(type)) m.pack();
        const std::vector<float> x = make_activations(
            shape.tokens, shape.cols, static_cast<uint32_t>(shape.rows * 31 + shape.tokens));
        const Reference ref = reference(m, x, shape.tokens);
        const std::size_t outputs = ref.value.size();
        std::vector<float> scalar_y;
        for (const Path& p : paths) {
            SCOPED_TRACE(::testing::Message()
                         << type_name(type) << " " << p.name << " rows " << shape.rows << " tokens "
                         << shape.tokens << " cols " << shape.cols);
            select_path(p);
            std::vector<float> y(outputs, -12345.0f);
            matmul(p.packed ? m.packed_view() : m.view(), x.data(), shape.tokens, y.data(), pool,
                   scratch, p.mode);
            std::vector<float> file_layout(outputs, -12345.0f);
            if (p.packed) {
                matmul(m.view(), x.data(), shape.tokens, file_layout.data(), pool, scratch,
                       MatmulMode::kBatchInvariant);
            }
            reset_path();
            if (p.packed && p.hwy_target != 0 && kernels_have_packed(p, type)) {
                expect_same_bits(y, file_layout, shape.tokens, shape.rows, "interleaved weights",
                                 "interleaved", "from the file's layout");
            }

            double err2 = 0, var = 0;
            int failures = 0;
            for (std::size_t o = 0; o < outputs; ++o) {
                const double err = y[o] - ref.value[o];
                err2 += err * err;
                var += ref.variance[o] + std::pow(0x1p-20 * ref.abs_sum[o], 2);
                if (!(std::fabs(err) <= ref.worst[o]) && failures++ < 3) {
                    ADD_FAILURE() << "output " << o << ": got " << y[o] << ", reference "
                                  << ref.value[o] << ", bound " << ref.worst[o];
                }
            }
            EXPECT_EQ(failures, 0);
            if (outputs >= 16) {
                EXPECT_LE(std::sqrt(err2), 2.0 * std::sqrt(var) + 1e-30)
                    << "rms error above twice the expected rounding noise";
            }
            if (p.hwy_target == 0) {
                scalar_y = y;
            } else {
                for (std::size_t o = 0; o < outputs; ++o) {
                    const double tol = 0x1p-13 * ref.abs_sum[o] + 1e-30;
                    if (!(std::fabs(y[o] - scalar_y[o]) <= tol)) {
                        ADD_FAILURE()
                            << "output " << o << " differs from the scalar reference: " << y[o]
                            << " vs " << scalar_y[o];
                        break;
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest, ::testing::ValuesIn(test::matmul_types()),
                         [](const auto& param_info) {
                             return std::string(type_name(param_info.param));
                         });

// ---- batch invariance ----

// Rows not a multiple of the 16-row panels; rows shorter and longer than the column chunks of the
// small-batch path (1024 values for quantized types, 256 for float types), with a partial last
// chunk (2304 = 2 x 1024 + 256; 864 = 3 x 256 + 96).
struct InvarianceShape {
    int64_t rows, cols;
};
const std::vector<InvarianceShape>& invariance_shapes() {
    static const std::vector<InvarianceShape> s = {{37, 256}, {21, 2304}, {5, 864}};
    return s;
}

// Batch sizes: every size of the small-batch path (1-15: 4, 2 and 1-token kernels, and one tile
// of 8 and more), the first GEMM sizes, and 33 (four whole tiles and one more token).
std::vector<int64_t> batch_sizes() {
    std::vector<int64_t> sizes;
    for (int64_t n = 1; n <= 20; ++n) sizes.push_back(n);
    sizes.push_back(33);
    return sizes;
}

// Every output of a batch of N tokens equals, bit for bit, that token's output computed alone.
void check_invariance(const WeightMatrix& w, const std::vector<float>& x, const std::string& what) {
    const std::vector<int64_t> sizes = batch_sizes();
    const int64_t max_tokens = sizes.back();
    ThreadPool pool1(1), pool2(2), pool3(3);
    ThreadPool* pools[] = {&pool1, &pool2, &pool3};
    MatmulScratch scratch;
    std::vector<float> alone(static_cast<std::size_t>(max_tokens * w.n_rows));
    for (int64_t t = 0; t < max_tokens; ++t) {
        matmul(w, x.data() + t * w.n_cols, 1, alone.data() + t * w.n_rows, pool1, scratch,
               MatmulMode::kBatchInvariant);
    }
    for (int64_t n : sizes) {
        for (ThreadPool* pool : pools) {
            std::vector<float> y(static_cast<std::size_t>(n * w.n_rows), -12345.0f);
            matmul(w, x.data(), n, y.data(), *pool, scratch, MatmulMode::kBatchInvariant);
            expect_same_bits(y, alone, n, w.n_rows,
                             concat(what, ", batch of ", n, " on ", pool->size(), " threads"));
        }
    }
}

class MatmulInvarianceTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulInvarianceTest, BatchOutputsAreBitIdenticalToSingleTokens) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const test::QuantFixture fixture(path.string());
    const GgmlType type = GetParam();
    for (const InvarianceShape& shape : invariance_shapes()) {
        if (shape.cols % std::max<int64_t>(32, block_size(type)) != 0) continue;
        TestMatrix m = fixture.make_matrix(type, shape.rows, shape.cols);
        const bool packed = kernels::has_packed_layout(type);
        if (packed) m.pack();
        const std::vector<float> x =
            make_activations(batch_sizes().back(), shape.cols, static_cast<uint32_t>(shape.cols));
        for (const Path& p : kernel_paths(/*invariant=*/false, packed)) {
            select_path(p);
            check_invariance(
                p.packed ? m.packed_view() : m.view(), x,
                concat(type_name(type), " ", p.name, ", ", shape.rows, " x ", shape.cols));
            reset_path();
        }
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulInvarianceTest, ::testing::ValuesIn(test::matmul_types()),
                         [](const auto& param_info) {
                             return std::string(type_name(param_info.param));
                         });

// Float weights of any row length (the fixture's rows are multiples of 32): the float panels are
// unpacked 16 columns at a time, and 37 and 300 leave 5 and 12 over; in the interleaved layout
// 300 columns are a stripe of 256 and one of 44. Random weights; the reference is a
// double-precision dot of the same rounded activations, within the float rounding of a sum of n
// terms (n * 2^-24 * sum |w x|).
TEST(MatmulInvariance, FloatWeightsOfOddRowLengths) {
    std::mt19937 rng(11);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (GgmlType type : {GgmlType::F32, GgmlType::F16, GgmlType::BF16}) {
        for (int64_t cols : {37, 300}) {
            constexpr int64_t kRows = 19;
            std::vector<std::byte> bytes(row_size(type, cols) * kRows);
            std::vector<float> values(static_cast<std::size_t>(cols * kRows));
            for (std::size_t i = 0; i < values.size(); ++i) {
                const float v = normal(rng);
                if (type == GgmlType::F32) {
                    std::memcpy(bytes.data() + i * 4, &v, 4);
                    values[i] = v;
                } else {
                    const uint16_t h = type == GgmlType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
                    std::memcpy(bytes.data() + i * 2, &h, 2);
                    values[i] = type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
                }
            }
            TestMatrix m{type, cols, kRows, bytes, values, {}};
            m.pack();
            const std::vector<float> x = make_activations(batch_sizes().back(), cols, 5);
            for (const Path& p : kernel_paths(/*invariant=*/false, /*packed=*/true)) {
                const std::string what = concat(type_name(type), " ", p.name, ", cols ", cols);
                const WeightMatrix w = p.packed ? m.packed_view() : m.view();
                select_path(p);
                check_invariance(w, x, what);
                ThreadPool pool(2);
                MatmulScratch scratch;
                constexpr int64_t kTokens = 3;
                std::vector<float> y(static_cast<std::size_t>(kTokens * kRows));
                matmul(w, x.data(), kTokens, y.data(), pool, scratch, MatmulMode::kBatchInvariant);
                std::vector<float> file_layout(y.size());
                matmul(m.view(), x.data(), kTokens, file_layout.data(), pool, scratch,
                       MatmulMode::kBatchInvariant);
                reset_path();
                expect_same_bits(y, file_layout, kTokens, kRows, what, "interleaved",
                                 "from the file's layout");
                for (int64_t t = 0; t < kTokens; ++t) {
                    for (int64_t r = 0; r < kRows; ++r) {
                        double sum = 0, abs_sum = 0;
                        for (int64_t k = 0; k < cols; ++k) {
                            float xk = x[static_cast<std::size_t>(t * cols + k)];
                            if (type == GgmlType::F16) xk = f16_to_f32(f32_to_f16(xk));
                            if (type == GgmlType::BF16) xk = bf16_to_f32(f32_to_bf16(xk));
                            const double term =
                                double{values[static_cast<std::size_t>(r * cols + k)]} * xk;
                            sum += term;
                            abs_sum += std::fabs(term);
                        }
                        const double got = y[static_cast<std::size_t>(t * kRows + r)];
                        EXPECT_LE(std::fabs(got - sum), cols * 0x1p-24 * abs_sum + 1e-30)
                            << what << ", token " << t << " row " << r;
                    }
                }
            }
        }
    }
}

// The fast mode is not batch-invariant where one token takes the GEMV kernels (x86's AVX2 and
// AVX-512), whose float sums run in another order than the GEMM's: on those paths some type's
// outputs for a token alone differ in the last bits from the same token in a batch of 16. This is
// what the invariant mode is for, and what makes its test (above) able to fail: were the two modes
// the same on a path, that test would prove nothing there. Types without a GEMV kernel on a path
// (every type on aarch64 and x86's older targets) take the GEMM for one token too, and so give
// the same bits in both.
TEST(MatmulInvariance, FastestModeDiffersBetweenBatchSizes) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const test::QuantFixture fixture(path.string());
    ThreadPool pool(2);
    MatmulScratch scratch;
    constexpr int64_t kRows = 37, kCols = 2304, kTokens = 16;
    const std::vector<float> x = make_activations(kTokens, kCols, 3);
    for (const Path& p : kernel_paths()) {
        if (p.hwy_target == 0) continue;  // the scalar reference: one order of sums for both
        select_path(p);
        std::string differing;
        bool any_gemv = false;
        for (GgmlType type : test::matmul_types()) {
            const TestMatrix m = fixture.make_matrix(type, kRows, kCols);
            std::vector<float> batch(kTokens * kRows), alone(kTokens * kRows);
            matmul(m.view(), x.data(), kTokens, batch.data(), pool, scratch);
            for (int64_t t = 0; t < kTokens; ++t)
                matmul(m.view(), x.data() + t * kCols, 1, alone.data() + t * kRows, pool, scratch);
            const bool same =
                std::memcmp(batch.data(), alone.data(), batch.size() * sizeof(float)) == 0;
            if (kernels::gemv_simd_available(type)) {
                any_gemv = true;
                if (!same) differing += concat(" ", type_name(type));
            } else {
                EXPECT_TRUE(same) << p.name << " " << type_name(type)
                                  << ": no GEMV kernel, yet one token differs from the batch";
            }
        }
        reset_path();
        if (any_gemv) {
            EXPECT_FALSE(differing.empty())
                << p.name << ": kGemvForOneToken gives the same bits alone as in a batch of 16";
        }
        RecordProperty("fastest_mode_differs_" + p.name, differing);
    }
}

TEST(Matmul, RejectsBadShapesAndTypes) {
    ThreadPool pool(1);
    MatmulScratch scratch;
    std::vector<std::byte> data(1024);
    float x[64] = {};
    float y[4] = {};
    EXPECT_THROW(matmul({GgmlType::Q4_0, 48, 1, data}, x, 1, y, pool, scratch), UsageError);
    EXPECT_THROW(matmul({GgmlType::Q4_0, 32, 100, data}, x, 1, y, pool, scratch), UsageError);
    // rows x row bytes overflows 64 bits: must be rejected, not wrapped around
    EXPECT_THROW(
        matmul({GgmlType::F32, int64_t{1} << 32, int64_t{1} << 32, data}, x, 1, y, pool, scratch),
        UsageError);
    EXPECT_THROW(matmul({GgmlType::IQ2_XXS, 256, 1, data}, x, 1, y, pool, scratch),
                 UnsupportedError);
    EXPECT_THROW(matmul({GgmlType::Q8_0, 32, 1, data}, x, -1, y, pool, scratch), UsageError);
    EXPECT_NO_THROW(matmul({GgmlType::Q8_0, 32, 1, data}, x, 0, y, pool, scratch));
}

// aarch64: the sdot and i8mm kernels (gemm_arm_neon-inl.h) and SVE's (gemm_arm_sve-inl.h) give
// the portable loops' bits for every type with integer panels (32-value blocks with and without
// offsets, K-quants with and without mins) and every token count; run under QEMU as neoverse-n1
// (sdot) and max (usmmla for two tokens or more, usdot for one; SVE's sdot on 512-bit vectors,
// and on 256-bit ones as max with sve-default-vector-length=32).
TEST(ArmDotProducts, GiveThePortableLoopsBits) {
    const ArmExtensions cpu = arm_extensions();
    if (cpu == ArmExtensions::kNone) {
        GTEST_SKIP() << "no ARM dot product on this CPU (" << kernels_in_use() << ")";
    }
    ThreadPool pool(2);
    MatmulScratch scratch;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q8_0,
                              GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                              GgmlType::Q6_K};
    const int64_t rows = 37, cols = 512;
    for (GgmlType type : types) {
        std::vector<float> wf(static_cast<std::size_t>(rows * cols));
        for (float& v : wf) v = normal(rng);
        std::vector<std::byte> wq(row_size(type, cols) * static_cast<std::size_t>(rows));
        quantize_rows(type, wf.data(), wq.data(), rows, cols);
        const WeightMatrix w{type, cols, rows, wq};
        for (int64_t n : {1, 2, 3, 5, 9, 17}) {
            std::vector<float> x(static_cast<std::size_t>(n * cols));
            for (float& v : x) v = normal(rng);
            std::vector<float> portable(static_cast<std::size_t>(n * rows));
            set_arm_extensions_limit(ArmExtensions::kNone);
            set_arm_sve_kernels_enabled(false);
            matmul(w, x.data(), n, portable.data(), pool, scratch, MatmulMode::kBatchInvariant);
            // NEON's dot products, then (limit cpu + 1) SVE's where the CPU has them.
            for (int limit = 1; limit <= static_cast<int>(cpu) + 1; ++limit) {
                set_arm_extensions_limit(
                    static_cast<ArmExtensions>(std::min(limit, static_cast<int>(cpu))));
                set_arm_sve_kernels_enabled(limit > static_cast<int>(cpu));
                if (limit > static_cast<int>(cpu) && arm_sve_kernel_bits() == 0) break;
                std::vector<float> y(portable.size(), -12345.0f);
                matmul(w, x.data(), n, y.data(), pool, scratch, MatmulMode::kBatchInvariant);
                expect_same_bits(y, portable, n, rows,
                                 concat(type_name(type), ", ", n, " tokens, ", kernels_in_use()),
                                 "with the dot products", "by the portable loops");
            }
            set_arm_extensions_limit(ArmExtensions::kI8mm);
            set_arm_sve_kernels_enabled(true);
        }
    }
}

}  // namespace
}  // namespace minfer
