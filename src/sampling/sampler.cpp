#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "core/error.h"

namespace minfer {

void SamplingParams::validate() const {
    const auto check = [](bool ok, const std::string& what) {
        if (!ok) throw UsageError(what);
    };
    check(std::isfinite(temperature) && temperature >= 0.0f,
          concat("--temp must be 0 (greedy) or more, got ", temperature));
    check(top_k >= 0, concat("--top-k must be >= 0, got ", top_k));
    check(top_p > 0.0f && top_p <= 1.0f, concat("--top-p must be in (0, 1], got ", top_p));
    check(min_p >= 0.0f && min_p <= 1.0f, concat("--min-p must be in [0, 1], got ", min_p));
    check(typical_p > 0.0f && typical_p <= 1.0f,
          concat("--typical-p must be in (0, 1], got ", typical_p));
    check(repeat_penalty > 0.0f && std::isfinite(repeat_penalty),
          concat("--repeat-penalty must be > 0, got ", repeat_penalty));
    check(std::isfinite(presence_penalty), "--presence-penalty must be a number");
    check(std::isfinite(frequency_penalty), "--frequency-penalty must be a number");
    check(penalty_last_n >= -1, concat("--repeat-last-n must be >= -1, got ", penalty_last_n));
    for (const auto& [id, bias] : logit_bias) {
        check(!std::isnan(bias), concat("--logit-bias for token ", id, " is not a number"));
    }
}

std::string SamplingParams::to_string() const {
    if (temperature <= 0.0f) return "greedy";
    return concat("temp ", temperature, ", top_k ", top_k, ", top_p ", top_p, ", min_p ", min_p,
                  ", typical_p ", typical_p, ", repeat_penalty ", repeat_penalty, " (last ",
                  penalty_last_n, "), presence ", presence_penalty, ", frequency ",
                  frequency_penalty, ", seed ", seed);
}

Sampler::Sampler(const SamplingParams& params, int32_t n_vocab)
    : params_(params), n_vocab_(n_vocab), rng_(params.seed) {
    params_.validate();
    for (const auto& [id, bias] : params_.logit_bias) {
        if (id < 0 || id >= n_vocab) {
            throw UsageError(concat("logit bias for token ", id,
                                    ": out of range (the vocabulary has ", n_vocab, " tokens)"));
        }
        (void)bias;
    }
}

void Sampler::reset() {
    history_.clear();
    rng_.seed(params_.seed);
}

void Sampler::accept(int32_t token) {
    history_.push_back(token);
    const auto limit = params_.penalty_last_n < 0
                           ? std::numeric_limits<std::size_t>::max()
                           : static_cast<std::size_t>(params_.penalty_last_n);
    while (history_.size() > limit) history_.pop_front();
}

void Sampler::apply_penalties() {
    const bool any = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                     params_.frequency_penalty != 0.0f;
    if (!any || history_.empty() || params_.penalty_last_n == 0) return;
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : history_) ++counts[t];
    // Candidates are still indexed by id here (no truncation has happened yet).
    for (const auto& [id, count] : counts) {
        if (id < 0 || id >= n_vocab_) continue;
        float& logit = candidates_[static_cast<std::size_t>(id)].logit;
        logit = logit > 0 ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
        logit -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
    }
}

void Sampler::softmax() {
    if (!sorted_) {
        std::sort(candidates_.begin(), candidates_.end(),
                  [](const Candidate& a, const Candidate& b) {
                      return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
                  });
        sorted_ = true;
    }
    const float max = candidates_.front().logit;
    double sum = 0;
    for (auto& c : candidates_) {
        c.p = std::exp(c.logit - max);
        sum += c.p;
    }
    for (auto& c : candidates_) c.p = static_cast<float>(c.p / sum);
}

void Sampler::top_k(int32_t k) {
    if (k <= 0 || static_cast<std::size_t>(k) >= candidates_.size()) return;
    const auto by_logit = [](const Candidate& a, const Candidate& b) {
        return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
    };
    std::partial_sort(candidates_.begin(), candidates_.begin() + k, candidates_.end(), by_logit);
    candidates_.resize(static_cast<std::size_t>(k));
    sorted_ = true;
}

// Keeps the tokens whose surprise is closest to the distribution's entropy, up to mass p.
void Sampler::typical(float p) {
    if (p >= 1.0f) return;
    softmax();
    double entropy = 0;
    for (const auto& c : candidates_) {
        if (c.p > 0) entropy -= c.p * std::log(c.p);
    }
    std::vector<std::size_t> order(candidates_.size());
    std::iota(order.begin(), order.end(), 0);
    std::vector<double> shift(candidates_.size());
    for (std::size_t i = 0; i < candidates_.size(); ++i) {
        shift[i] = std::abs(-std::log(std::max(candidates_[i].p, 1e-30f)) - entropy);
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return shift[a] < shift[b]; });
    double cumulative = 0;
    std::size_t keep = 0;
    while (keep < order.size()) {
        cumulative += candidates_[order[keep]].p;
        ++keep;
        if (cumulative > p) break;
    }
    std::vector<Candidate> kept;
    for (std::size_t i = 0; i < keep; ++i) kept.push_back(candidates_[order[i]]);
    candidates_ = std::move(kept);
    sorted_ = false;
}

void Sampler::top_p(float p) {
    if (p >= 1.0f) return;
    softmax();
    double cumulative = 0;
    std::size_t keep = 0;
    while (keep < candidates_.size()) {
        cumulative += candidates_[keep].p;
        ++keep;
        if (cumulative >= p) break;
    }
    candidates_.resize(keep);
}

void Sampler::min_p(float p) {
    if (p <= 0.0f) return;
    softmax();
    const float threshold = candidates_.front().p * p;
    std::size_t keep = 1;
    while (keep < candidates_.size() && candidates_[keep].p >= threshold) ++keep;
    candidates_.resize(keep);
}

int32_t Sampler::sample(std::span<const float> logits) {
    if (static_cast<int64_t>(logits.size()) != n_vocab_) {
        throw Error(concat("sampler expects ", n_vocab_, " logits, got ", logits.size()));
    }
    candidates_.resize(logits.size());
    for (std::size_t i = 0; i < logits.size(); ++i)
        candidates_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
    sorted_ = false;
    for (const auto& [id, bias] : params_.logit_bias)
        candidates_[static_cast<std::size_t>(id)].logit += bias;
    apply_penalties();

    if (params_.temperature <= 0.0f) {
        const auto best = std::max_element(
            candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
                return a.logit < b.logit || (a.logit == b.logit && a.id > b.id);
            });
        return best->id;
    }
    // Banned tokens (-inf) never survive truncation.
    std::erase_if(candidates_,
                  [](const Candidate& c) { return std::isinf(c.logit) && c.logit < 0; });
    if (candidates_.empty()) throw UsageError("every token is banned by the logit bias");
    top_k(params_.top_k);
    typical(params_.typical_p);
    top_p(params_.top_p);
    min_p(params_.min_p);
    for (auto& c : candidates_) c.logit /= params_.temperature;
    softmax();
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    double r = uniform(rng_);
    for (const auto& c : candidates_) {
        r -= c.p;
        if (r <= 0) return c.id;
    }
    return candidates_.back().id;
}

}  // namespace minfer
