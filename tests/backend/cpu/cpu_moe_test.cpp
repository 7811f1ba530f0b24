// The CPU backend's mixture-of-experts pieces (backend/cpu/cpu_moe.h): routing against its
// definition, and the grouped expert matmul against plain dot products, with the experts that no
// row picked behind PROT_NONE pages: a read of any of their bytes would crash, so passing proves
// that a step reads only the experts its rows chose (decoding one token: k of n_expert).

#include "backend/cpu/cpu_moe.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <random>

#include "backend/cpu/packed_weights.h"
#include "core/spin_barrier.h"
#include "core/thread_pool.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"
#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace minfer {
namespace {

TEST(MoeRoute, SoftmaxTopKRenormalised) {
    std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.5f, 2.0f, 0.0f};
    std::vector<double> p(logits.begin(), logits.end());
    double sum = 0;
    for (double& x : p) sum += x = std::exp(x - 2.0);
    std::vector<float> probs(6), weights(3);
    std::vector<int32_t> ids(3);
    moe_route_row(logits.data(), 6, 3, probs.data(), ids.data());
    // Experts 1 and 4 tie: the lower id first; then 3.
    EXPECT_EQ(ids, (std::vector<int32_t>{1, 4, 3}));
    moe_weights_row(logits.data(), 6, ids.data(), 3, probs.data(), weights.data());
    const double picked = p[1] + p[4] + p[3];
    EXPECT_NEAR(weights[0], p[1] / picked, 1e-6);
    EXPECT_NEAR(weights[1], p[4] / picked, 1e-6);
    EXPECT_NEAR(weights[2], p[3] / picked, 1e-6);
    EXPECT_NEAR(weights[0] + weights[1] + weights[2], 1.0, 1e-6);
    // The router logits are read, not overwritten.
    EXPECT_EQ(logits[1], 2.0f);
}

TEST(MoeCombine, WeightedSumInSlotOrder) {
    const std::vector<float> experts = {1, 2, 3, 10, 20, 30};  // [2 slots][3]
    const std::vector<float> weights = {0.25f, 0.75f};
    std::vector<float> out(3);
    moe_combine_row(experts.data(), weights.data(), 2, 3, out.data());
    EXPECT_EQ(out, (std::vector<float>{7.75f, 15.5f, 23.25f}));
}

// n_expert matrices [n_out][n_in] of `type`, each in its own page-aligned region; the ones not in
// `readable` made unreadable.
class GuardedExperts {
  public:
    GuardedExperts(GgmlType type, int64_t n_in, int64_t n_out, int64_t n_expert,
                   const std::vector<int64_t>& readable)
        : type_(type), n_in_(n_in), n_out_(n_out), n_expert_(n_expert) {
        const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        expert_bytes_ = row_size(type, n_in) * static_cast<std::size_t>(n_out);
        EXPECT_EQ(expert_bytes_ % page, 0u) << "experts must fill whole pages";
        bytes_ = expert_bytes_ * static_cast<std::size_t>(n_expert);
        void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        EXPECT_NE(p, MAP_FAILED);
        base_ = static_cast<std::byte*>(p);
        std::mt19937 rng(7);
        std::normal_distribution<float> normal(0.0f, 0.2f);
        values_.resize(static_cast<std::size_t>(n_expert * n_out * n_in));
        for (float& v : values_) v = normal(rng);
        for (int64_t r = 0; r < n_expert * n_out; ++r) {
            std::byte* row = base_ + static_cast<std::size_t>(r) * row_size(type, n_in);
            quantize_row(type, values_.data() + r * n_in, row, n_in);
            // What the kernels see: the weights as stored.
            dequantize_row(type, row, values_.data() + r * n_in, n_in);
        }
        for (int64_t e = 0; e < n_expert; ++e) {
            if (std::find(readable.begin(), readable.end(), e) != readable.end()) continue;
            EXPECT_EQ(mprotect(base_ + static_cast<std::size_t>(e) * expert_bytes_, expert_bytes_,
                               PROT_NONE),
                      0);
        }
    }
    ~GuardedExperts() { munmap(base_, bytes_); }

    // Every expert unreadable from now on (their copies must be read instead).
    void lock_all() const { EXPECT_EQ(mprotect(base_, bytes_, PROT_NONE), 0); }

    Weight weight() const {
        Weight w;
        w.type = type_;
        w.n_dims = 3;
        w.ne = {n_in_, n_out_, n_expert_, 1};
        w.data = std::span<const std::byte>(base_, bytes_);
        return w;
    }
    // Row r of expert e, as stored.
    const float* row(int64_t e, int64_t r) const {
        return values_.data() + (e * n_out_ + r) * n_in_;
    }

  private:
    GgmlType type_;
    int64_t n_in_, n_out_, n_expert_;
    std::size_t expert_bytes_ = 0, bytes_ = 0;
    std::byte* base_ = nullptr;
    std::vector<float> values_;
};

struct MoeCase {
    GgmlType type;
    int64_t n_in, n_out;
    bool per_slot;
};

class MoeMatmulTest : public testing::TestWithParam<MoeCase> {};

// Tokens pick among experts 0, 2 and 5 only: token t takes kChoices[(first + t) % 3], `first` a
// run's choice (1: a single token's slots in the reverse of the experts' order).
constexpr int64_t kExperts = 6, kUsed = 2;
constexpr int64_t kChoices[3][2] = {{0, 2}, {5, 0}, {2, 5}};

// x: the op's input [n_tokens][k * n_in or n_in] (normal, seeded by n_tokens).
std::vector<float> moe_input(const MoeCase& c, int64_t n_tokens) {
    std::mt19937 rng(static_cast<unsigned>(n_tokens));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t width_in = c.per_slot ? kUsed * c.n_in : c.n_in;
    std::vector<float> x(static_cast<std::size_t>(n_tokens * width_in));
    for (float& v : x) v = normal(rng);
    return x;
}

// One MoeMatMul op over `w` as the CPU backend runs it (its phases, barriers between them):
// out [n_tokens][k][n_out].
std::vector<float> run_moe_op(const MoeCase& c, const Weight& w, const std::vector<float>& x,
                              int64_t n_tokens, MatmulMode mode, const PackedWeights& packed,
                              ThreadPool& pool, MoeWorkspace& ws, int64_t first = 0) {
    std::vector<int32_t> ids(static_cast<std::size_t>(n_tokens * kUsed));
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t j = 0; j < kUsed; ++j)
            ids[static_cast<std::size_t>(t * kUsed + j)] =
                static_cast<int32_t>(kChoices[(first + t) % 3][j]);
    }
    Op op{};
    op.type = OpType::MoeMatMul;
    op.weight = &w;
    op.rows = n_tokens;
    op.width = kUsed * c.n_out;
    op.moe = MoeParams{kExperts, kUsed, c.per_slot};
    std::vector<float> y(static_cast<std::size_t>(n_tokens * op.width), NAN);
    MoeMatmul moe(op, x.data(), ids.data(), y.data(), pool.size(), mode, ws, packed);
    SpinBarrier barrier(pool.size());
    pool.run([&](int i, int n) { moe.run(i, n, barrier); });
    return y;
}

// 6 experts, k = 2; tokens pick among experts 0, 2 and 5 only (1, 3, 4 unreadable). One token
// (decoding) and 19 tokens (a prefill: the experts' GEMM paths), both matmul modes.
TEST_P(MoeMatmulTest, ReadsOnlyTheChosenExpertsAndComputesTheirProducts) {
    const MoeCase& c = GetParam();
    const GuardedExperts experts(c.type, c.n_in, c.n_out, kExperts, {0, 2, 5});
    const Weight w = experts.weight();
    ThreadPool pool(2);
    MoeWorkspace ws;
    const PackedWeights none;
    // One token with its slots in the experts' order and in the reverse (its outputs written in
    // place, each to its slot), and 19 tokens.
    for (const auto& [n_tokens, first] : {std::pair<int64_t, int64_t>{1, 0}, {1, 1}, {19, 0}}) {
        for (const MatmulMode mode : {MatmulMode::kBatchInvariant, MatmulMode::kGemvForOneToken}) {
            SCOPED_TRACE(testing::Message()
                         << n_tokens << " tokens from choice " << first << ", mode " << int(mode));
            const std::vector<float> x = moe_input(c, n_tokens);
            const std::vector<float> y = run_moe_op(c, w, x, n_tokens, mode, none, pool, ws, first);
            // Against dot products of the stored weights with the inputs (the kernels quantize
            // the activations: a relative tolerance of that size).
            for (int64_t t = 0; t < n_tokens; ++t) {
                for (int64_t j = 0; j < kUsed; ++j) {
                    const int64_t e = kChoices[(first + t) % 3][j];
                    const float* in =
                        x.data() + (c.per_slot ? (t * kUsed + j) * c.n_in : t * c.n_in);
                    for (int64_t r = 0; r < c.n_out; ++r) {
                        double dot = 0, norm = 0;
                        for (int64_t i = 0; i < c.n_in; ++i) {
                            dot += static_cast<double>(experts.row(e, r)[i]) * in[i];
                            norm += std::abs(static_cast<double>(experts.row(e, r)[i]) * in[i]);
                        }
                        const float got =
                            y[static_cast<std::size_t>((t * kUsed + j) * c.n_out + r)];
                        ASSERT_NEAR(got, dot, 1e-2 * norm + 1e-5)
                            << "token " << t << " slot " << j << " row " << r;
                    }
                }
            }
        }
    }
}

// With the experts' slices repacked (packed_weights.h), the op reads the copies only (every
// original is made unreadable once packed) and gets the bits of the file's layout in the
// batch-invariant mode, in both modes, for 1 and 19 tokens.
TEST_P(MoeMatmulTest, ReadsTheRepackedExpertsWithTheFileLayoutsBits) {
    const MoeCase& c = GetParam();
    if (!kernels::packed_kernels_available(c.type))
        GTEST_SKIP() << type_name(c.type)
                     << (kernels::has_packed_layout(c.type) ? ": no interleaved kernels on this CPU"
                                                            : " has no interleaved layout");
    const GuardedExperts experts(c.type, c.n_in, c.n_out, kExperts, {0, 2, 5});
    const Weight w = experts.weight();
    ThreadPool pool(2);
    MoeWorkspace ws;
    const PackedWeights none;
    std::vector<std::vector<float>> reference;  // per token count: the file's layout
    for (const int64_t n_tokens : {int64_t{1}, int64_t{19}}) {
        reference.push_back(run_moe_op(c, w, moe_input(c, n_tokens), n_tokens,
                                       MatmulMode::kBatchInvariant, none, pool, ws));
    }
    PackedWeights packed;
    std::vector<WeightMatrix> slices;
    for (const int64_t e : {0, 2, 5}) {
        const Weight m = w.matrix(e);
        slices.push_back(WeightMatrix{m.type, m.n_cols(), m.n_rows(), m.data});
    }
    packed.prepare(slices, pool);
    ASSERT_EQ(packed.matrices(), 3u);
    experts.lock_all();
    for (std::size_t i = 0; i < reference.size(); ++i) {
        const int64_t n_tokens = i == 0 ? 1 : 19;
        for (const MatmulMode mode : {MatmulMode::kBatchInvariant, MatmulMode::kGemvForOneToken}) {
            SCOPED_TRACE(testing::Message() << n_tokens << " tokens, mode " << int(mode));
            const std::vector<float> y =
                run_moe_op(c, w, moe_input(c, n_tokens), n_tokens, mode, packed, pool, ws);
            ASSERT_EQ(y.size(), reference[i].size());
            for (std::size_t k = 0; k < y.size(); ++k)
                ASSERT_EQ(std::bit_cast<uint32_t>(y[k]), std::bit_cast<uint32_t>(reference[i][k]))
                    << "output " << k;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, MoeMatmulTest,
                         testing::Values(MoeCase{GgmlType::F32, 64, 64, false},
                                         MoeCase{GgmlType::F32, 64, 64, true},
                                         MoeCase{GgmlType::Q8_0, 256, 256, false},
                                         MoeCase{GgmlType::Q4_K, 256, 512, true}),
                         [](const testing::TestParamInfo<MoeCase>& p) {
                             return std::string(type_name(p.param.type)) +
                                    (p.param.per_slot ? "_per_slot" : "_shared");
                         });

}  // namespace
}  // namespace minfer
