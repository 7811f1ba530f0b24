#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "kernels/ops.h"

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
    int64_t banned = 0;
    for (const auto& [id, bias] : params_.logit_bias) {
        if (id < 0 || id >= n_vocab) {
            throw UsageError(concat("logit bias for token ", id,
                                    ": out of range (the vocabulary has ", n_vocab, " tokens)"));
        }
        if (std::isinf(bias) && bias < 0) ++banned;
    }
    // Refused here rather than when sampling, in the middle of a batch of other sequences.
    if (banned >= n_vocab) throw UsageError("every token is banned by the logit bias");
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

std::vector<std::pair<int32_t, float>> Sampler::adjusted_logits(
    std::span<const float> logits) const {
    std::map<int32_t, float> adjusted;
    for (const auto& [id, bias] : params_.logit_bias)
        adjusted[id] = logits[static_cast<std::size_t>(id)] + bias;
    const bool any = params_.repeat_penalty != 1.0f || params_.presence_penalty != 0.0f ||
                     params_.frequency_penalty != 0.0f;
    if (any && !history_.empty() && params_.penalty_last_n != 0) {
        std::unordered_map<int32_t, int> counts;
        for (int32_t t : history_) ++counts[t];
        for (const auto& [id, count] : counts) {
            if (id < 0 || id >= n_vocab_) continue;
            const auto it = adjusted.find(id);
            float logit = it != adjusted.end() ? it->second : logits[static_cast<std::size_t>(id)];
            logit = logit > 0 ? logit / params_.repeat_penalty : logit * params_.repeat_penalty;
            logit -=
                static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
            adjusted[id] = logit;
        }
    }
    return {adjusted.begin(), adjusted.end()};
}

namespace {

// Candidate order: the larger logit first, the lower id among equals.
bool better(const Sampler::Candidate& a, const Sampler::Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

}  // namespace

namespace {

bool is_allowed(std::span<const uint64_t> allowed, int32_t id) {
    return allowed.empty() || ((allowed[static_cast<std::size_t>(id) >> 6] >> (id & 63)) & 1);
}

}  // namespace

void Sampler::select_best(std::span<const float> logits,
                          std::span<const std::pair<int32_t, float>> adjusted, std::size_t k,
                          std::span<const uint64_t> allowed) {
    // A heap of the k best so far whose front is the worst of them. Ids come in ascending order,
    // so a logit equal to the worst's is never better: one comparison rejects almost every token.
    candidates_.clear();
    float worst = -std::numeric_limits<float>::infinity();  // of the heap, once it holds k
    const auto consider = [&](int32_t id, float logit) {
        if (candidates_.size() < k) {
            candidates_.push_back({id, logit, 0.0f});
            std::push_heap(candidates_.begin(), candidates_.end(), better);
        } else {
            std::pop_heap(candidates_.begin(), candidates_.end(), better);
            candidates_.back() = {id, logit, 0.0f};
            std::push_heap(candidates_.begin(), candidates_.end(), better);
        }
        if (candidates_.size() == k) worst = candidates_.front().logit;
    };
    int32_t next = 0;
    const float* x = logits.data();
    const auto raw_range = [&](int32_t from, int32_t end) {
        for (int32_t i = from; i < end; ++i) {
            // Once the heap is full, a vector scan skips to the next logit above the worst (the
            // scalar test cost 127 us of a 152k vocabulary's greedy pick).
            if (candidates_.size() == k) {
                i += static_cast<int32_t>(first_above(x + i, end - i, worst));
                if (i == end) break;
            }
            consider(i, x[i]);
        }
    };
    const auto raw_until = [&](int32_t end) {
        if (allowed.empty()) {
            raw_range(next, end);
            next = end;
            return;
        }
        // A grammar's mask: whole words of allowed tokens as above, the others bit by bit.
        while (next < end) {
            const int32_t word_end = std::min(end, (next | 63) + 1);
            const uint64_t word = allowed[static_cast<std::size_t>(next) >> 6] >> (next & 63);
            if (word == 0) {
                next = word_end;
                continue;
            }
            if (~word == 0 && word_end - next == 64) {
                raw_range(next, word_end);
            } else {
                for (uint64_t bits = word; bits != 0; bits &= bits - 1) {
                    const int32_t i = next + __builtin_ctzll(bits);
                    if (i >= word_end) break;
                    if (x[i] > worst || candidates_.size() < k) consider(i, x[i]);
                }
            }
            next = word_end;
        }
    };
    for (const auto& [id, logit] : adjusted) {
        raw_until(id);
        if ((logit > worst || candidates_.size() < k) && is_allowed(allowed, id))
            consider(id, logit);
        next = id + 1;
    }
    raw_until(n_vocab_);
    std::sort(candidates_.begin(), candidates_.end(), better);
    sorted_ = true;
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

int32_t Sampler::sample(std::span<const float> logits, std::span<const uint64_t> allowed) {
    if (static_cast<int64_t>(logits.size()) != n_vocab_) {
        throw Error(concat("sampler expects ", n_vocab_, " logits, got ", logits.size()));
    }
    if (!allowed.empty() && allowed.size() != (logits.size() + 63) / 64)
        throw Error(
            concat("sampler: a mask of ", allowed.size(), " words for ", logits.size(), " logits"));
    const auto adjusted = adjusted_logits(logits);
    // Greedy and top-k select their candidates in one pass over the logits instead of sorting a
    // list of the whole vocabulary (bench_sampling, 151,936 logits: greedy 246 -> 104 us, the
    // default chain 377 -> 114 us, paid by every decoding sequence at every step).
    const auto k = static_cast<std::size_t>(params_.top_k);
    const auto banned = [](const Candidate& c) { return std::isinf(c.logit) && c.logit < 0; };
    if (params_.temperature <= 0.0f) {
        select_best(logits, adjusted, 1, allowed);
        if (candidates_.empty() || banned(candidates_.front())) return -1;
        return candidates_.front().id;
    }
    if (k > 0 && k < logits.size()) {
        select_best(logits, adjusted, k, allowed);
    } else {
        candidates_.resize(logits.size());
        for (std::size_t i = 0; i < logits.size(); ++i)
            candidates_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};
        for (const auto& [id, logit] : adjusted)
            candidates_[static_cast<std::size_t>(id)].logit = logit;
        if (!allowed.empty()) {
            std::erase_if(candidates_,
                          [&](const Candidate& c) { return !is_allowed(allowed, c.id); });
        }
        sorted_ = false;
    }
    // Banned tokens (-inf) never survive truncation.
    std::erase_if(candidates_, banned);
    if (candidates_.empty()) return -1;
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
