// The sampler chain: determinism per seed, greedy = argmax, and each sampler's effect on a known
// distribution, checked statistically with fixed seeds.

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "sampling/sampler.h"

namespace minfer {
namespace {

// Logits whose softmax is exactly `probs`.
std::vector<float> logits_for(const std::vector<double>& probs) {
    std::vector<float> out;
    for (double p : probs) out.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
    return out;
}

SamplingParams plain(float temperature = 1.0f) {
    SamplingParams p;
    p.temperature = temperature;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 42;
    return p;
}

// Frequencies of each token over n draws.
std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int n) {
    std::vector<double> f(logits.size());
    for (int i = 0; i < n; ++i) f[static_cast<std::size_t>(s.sample(logits))] += 1.0 / n;
    return f;
}

constexpr int kDraws = 20000;
// Binomial standard error at p = 0.5 over 20000 draws is 0.0035; 0.02 is over five of them.
constexpr double kStatTolerance = 0.02;

TEST(Sampler, DefaultsAreLlamaCpps) {
    const SamplingParams p;
    EXPECT_FLOAT_EQ(p.temperature, 0.8f);
    EXPECT_EQ(p.top_k, 40);
    EXPECT_FLOAT_EQ(p.top_p, 0.95f);
    EXPECT_FLOAT_EQ(p.min_p, 0.05f);
    EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
}

TEST(Sampler, GreedyIsArgmax) {
    Sampler s(plain(0.0f), 5);
    EXPECT_EQ(s.sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f, 0.0f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{5.0f, 3.0f, -1.0f, 2.9f, 5.0f}), 0);  // ties: lowest id
}

// Greedy sees the logits after bias, then penalties (a token with both: (2.0 + 1.0) / 2 = 1.5),
// and breaks ties towards the lowest id whether the tied tokens were adjusted or not.
TEST(Sampler, GreedyAppliesBiasThenPenaltiesAndBreaksTiesByLowestId) {
    SamplingParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    p.logit_bias = {{1, 1.0f}, {4, 0.5f}};
    Sampler s(p, 5);
    s.accept(1);
    // id 1: 1.5 (bias then penalty; penalty then bias would give 2.0), id 3: 1.5 raw, id 4: 1.5.
    EXPECT_EQ(s.sample(std::vector<float>{0.0f, 2.0f, 1.0f, 1.5f, 1.0f}), 1);
    EXPECT_EQ(s.sample(std::vector<float>{0.0f, 2.0f, 1.0f, 1.6f, 1.0f}), 3);
    EXPECT_EQ(s.sample(std::vector<float>{0.0f, 2.0f, 1.0f, 1.0f, 1.2f}), 4);  // the last id
    EXPECT_EQ(s.sample(std::vector<float>{1.5f, 2.0f, 1.0f, 1.0f, 1.0f}), 0);  // before them
}

TEST(Sampler, SameSeedSameTokens) {
    const auto logits = logits_for({0.1, 0.2, 0.3, 0.25, 0.15});
    SamplingParams p = plain();
    p.seed = 7;
    Sampler a(p, 5), b(p, 5);
    std::vector<int32_t> ta, tb;
    for (int i = 0; i < 200; ++i) {
        ta.push_back(a.sample(logits));
        tb.push_back(b.sample(logits));
    }
    EXPECT_EQ(ta, tb);
    p.seed = 8;
    Sampler c(p, 5);
    std::vector<int32_t> tc;
    for (int i = 0; i < 200; ++i) tc.push_back(c.sample(logits));
    EXPECT_NE(ta, tc);
    a.reset();
    EXPECT_EQ(a.sample(logits), ta[0]);
}

TEST(Sampler, TemperatureOneFollowsTheDistribution) {
    const std::vector<double> probs = {0.5, 0.3, 0.2};
    Sampler s(plain(1.0f), 3);
    const auto f = frequencies(s, logits_for(probs), kDraws);
    for (std::size_t i = 0; i < probs.size(); ++i) EXPECT_NEAR(f[i], probs[i], kStatTolerance) << i;
}

TEST(Sampler, LowTemperatureSharpens) {
    // p^(1/T) renormalized: T = 0.5 squares the probabilities.
    const std::vector<double> probs = {0.5, 0.3, 0.2};
    Sampler s(plain(0.5f), 3);
    const auto f = frequencies(s, logits_for(probs), kDraws);
    const double z = 0.25 + 0.09 + 0.04;
    EXPECT_NEAR(f[0], 0.25 / z, kStatTolerance);
    EXPECT_NEAR(f[1], 0.09 / z, kStatTolerance);
    EXPECT_NEAR(f[2], 0.04 / z, kStatTolerance);
}

TEST(Sampler, TopKKeepsTheKBest) {
    SamplingParams p = plain();
    p.top_k = 2;
    Sampler s(p, 4);
    const auto f = frequencies(s, logits_for({0.4, 0.1, 0.3, 0.2}), kDraws);
    EXPECT_EQ(f[1], 0.0);
    EXPECT_EQ(f[3], 0.0);
    EXPECT_NEAR(f[0], 0.4 / 0.7, kStatTolerance);
    EXPECT_NEAR(f[2], 0.3 / 0.7, kStatTolerance);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
    SamplingParams p = plain();
    p.top_p = 0.75f;  // 0.5 + 0.3 >= 0.75: two tokens
    Sampler s(p, 3);
    const auto f = frequencies(s, logits_for({0.5, 0.3, 0.2}), kDraws);
    EXPECT_EQ(f[2], 0.0);
    EXPECT_NEAR(f[0], 0.5 / 0.8, kStatTolerance);
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
    SamplingParams p = plain();
    p.min_p = 0.5f;  // keep p >= 0.25
    Sampler s(p, 4);
    const auto f = frequencies(s, logits_for({0.5, 0.26, 0.14, 0.10}), kDraws);
    EXPECT_EQ(f[2], 0.0);
    EXPECT_EQ(f[3], 0.0);
    EXPECT_NEAR(f[0], 0.5 / 0.76, kStatTolerance);
}

TEST(Sampler, TypicalKeepsTokensNearTheEntropy) {
    // Entropy of {0.7, 0.1, 0.1, 0.1} is 0.94 nats; surprises: 0.36 (|0.58| away) and 2.30
    // (|1.36|). With typical_p 0.5 only the most typical token (id 0) is needed to pass 0.5.
    SamplingParams p = plain();
    p.typical_p = 0.5f;
    Sampler s(p, 4);
    const auto f = frequencies(s, logits_for({0.7, 0.1, 0.1, 0.1}), 2000);
    EXPECT_NEAR(f[0], 1.0, 1e-9);
}

TEST(Sampler, RepetitionPenaltyLowersSeenTokens) {
    SamplingParams p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    Sampler s(p, 3);
    const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
    EXPECT_EQ(s.sample(logits), 0);
    s.accept(0);  // 2.0 -> 1.0, below token 1's 1.5
    EXPECT_EQ(s.sample(logits), 1);
}

TEST(Sampler, PresenceAndFrequencyPenalties) {
    SamplingParams p = plain(0.0f);
    p.frequency_penalty = 0.4f;
    Sampler s(p, 2);
    const std::vector<float> logits = {1.0f, 0.5f};
    s.accept(0);
    EXPECT_EQ(s.sample(logits), 0);  // 1.0 - 0.4 = 0.6 > 0.5
    s.accept(0);
    EXPECT_EQ(s.sample(logits), 1);  // 1.0 - 0.8 = 0.2 < 0.5

    SamplingParams q = plain(0.0f);
    q.presence_penalty = 0.6f;
    Sampler t(q, 2);
    t.accept(0);
    EXPECT_EQ(t.sample(logits), 1);  // 0.4 < 0.5
}

TEST(Sampler, PenaltyWindowForgetsOldTokens) {
    SamplingParams p = plain(0.0f);
    p.presence_penalty = 10.0f;
    p.penalty_last_n = 2;
    Sampler s(p, 3);
    const std::vector<float> logits = {1.0f, 0.5f, 0.0f};
    s.accept(0);
    s.accept(2);
    s.accept(2);  // token 0 left the window of 2
    EXPECT_EQ(s.sample(logits), 0);
}

TEST(Sampler, LogitBiasBansAndBoosts) {
    SamplingParams p = plain();
    p.logit_bias = {{0, -INFINITY}, {2, 100.0f}};
    Sampler s(p, 3);
    const auto f = frequencies(s, logits_for({0.9, 0.05, 0.05}), 1000);
    EXPECT_EQ(f[0], 0.0);
    EXPECT_GT(f[2], 0.99);
}

TEST(Sampler, RejectsBadParameters) {
    SamplingParams p;
    p.top_p = 0.0f;
    EXPECT_THROW(Sampler(p, 10), UsageError);
    p = {};
    p.min_p = 1.5f;
    EXPECT_THROW(Sampler(p, 10), UsageError);
    p = {};
    p.repeat_penalty = 0.0f;
    EXPECT_THROW(Sampler(p, 10), UsageError);
    p = {};
    p.logit_bias = {{10, 1.0f}};
    EXPECT_THROW(Sampler(p, 10), UsageError);
    p = {};
    p.top_k = -1;
    EXPECT_THROW(Sampler(p, 10), UsageError);
    // Every token banned: refused up front, not when sampling.
    p = {};
    for (int32_t id = 0; id < 3; ++id) p.logit_bias[id] = -INFINITY;
    EXPECT_THROW(Sampler(p, 3), UsageError);
    p.logit_bias.erase(2);
    EXPECT_NO_THROW(Sampler(p, 3));
}

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

// A mask over n tokens allowing `ids`.
std::vector<uint64_t> mask_of(std::size_t n, const std::vector<int32_t>& ids) {
    std::vector<uint64_t> words((n + 63) / 64, 0);
    for (const int32_t id : ids)
        words[static_cast<std::size_t>(id) / 64] |= uint64_t{1} << (id % 64);
    return words;
}

TEST(SamplerMask, GreedyPicksTheBestAllowedToken) {
    std::vector<float> logits(200, 0.0f);
    logits[7] = 9.0f;    // the best, not allowed
    logits[130] = 5.0f;  // the best allowed
    logits[64] = 4.0f;
    Sampler s(plain(0.0f), 200);
    EXPECT_EQ(s.sample(logits, mask_of(200, {64, 130, 199})), 130);
    EXPECT_EQ(s.sample(logits, mask_of(200, {64, 199})), 64);
    EXPECT_EQ(s.sample(logits, mask_of(200, {199})), 199);
    EXPECT_EQ(s.sample(logits), 7);
}

TEST(SamplerMask, WholeWordsAndSingleBitsAgreeWithNoMask) {
    // A mask allowing everything gives the same draws as no mask.
    std::vector<float> logits(300);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
    std::vector<int32_t> all(300);
    for (int32_t i = 0; i < 300; ++i) all[static_cast<std::size_t>(i)] = i;
    SamplingParams p;  // the default chain: top-k 40 selects through the mask
    p.seed = 3;
    Sampler a(p, 300), b(p, 300);
    const auto everything = mask_of(300, all);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(a.sample(logits, everything), b.sample(logits));
}

TEST(SamplerMask, DrawsFollowTheDistributionRenormalizedOverAllowedTokens) {
    const auto logits = logits_for({0.4, 0.1, 0.2, 0.3});
    Sampler s(plain(), 4);
    const auto allowed = mask_of(4, {1, 3});
    std::vector<double> f(4);
    for (int i = 0; i < kDraws; ++i)
        f[static_cast<std::size_t>(s.sample(logits, allowed))] += 1.0 / kDraws;
    EXPECT_EQ(f[0], 0.0);
    EXPECT_EQ(f[2], 0.0);
    EXPECT_NEAR(f[1], 0.25, 0.02);
    EXPECT_NEAR(f[3], 0.75, 0.02);
}

TEST(SamplerMask, NoAllowedTokenLeftIsMinusOne) {
    SamplingParams p = plain(0.0f);
    p.logit_bias[2] = -INFINITY;
    Sampler greedy(p, 4);
    EXPECT_EQ(greedy.sample(std::vector<float>{1, 2, 3, 4}, mask_of(4, {2})), -1);
    p.temperature = 1.0f;
    Sampler chain(p, 4);
    EXPECT_EQ(chain.sample(std::vector<float>{1, 2, 3, 4}, mask_of(4, {2})), -1);
    EXPECT_EQ(chain.sample(std::vector<float>{1, 2, 3, 4}, mask_of(4, {1, 2})), 1);
}

}  // namespace
}  // namespace minfer
