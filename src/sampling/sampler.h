#pragma once
// The sampler chain: from a logits row to the next token. The order and the defaults are
// llama.cpp's: logit bias -> repetition/presence/frequency penalties over the last N tokens ->
// top-k -> typical-p -> top-p -> min-p -> temperature -> a draw from the seeded RNG. A
// temperature of 0 is greedy: the most likely token after bias and penalties.

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace minfer {

struct SamplingParams {
    float temperature = 0.8f;
    int32_t top_k = 40;                   // 0 = off
    float top_p = 0.95f;                  // 1 = off
    float min_p = 0.05f;                  // 0 = off
    float typical_p = 1.0f;               // 1 = off
    float repeat_penalty = 1.0f;          // 1 = off
    float presence_penalty = 0.0f;        // 0 = off
    float frequency_penalty = 0.0f;       // 0 = off
    int32_t penalty_last_n = 64;          // how many recent tokens the penalties look at (-1 = all)
    std::map<int32_t, float> logit_bias;  // added to a token's logit (-inf bans it)
    uint64_t seed = 0;

    // Throws UsageError naming the parameter out of range.
    void validate() const;
    std::string to_string() const;  // "temp 0.80, top_k 40, ..."
};

class Sampler {
  public:
    Sampler(const SamplingParams& params, int32_t n_vocab);

    // Picks the next token from logits [n_vocab]. Does not record it: call accept().
    // `allowed`, when not empty, is a bit per token (bit i%64 of word i/64): only those may be
    // picked, as if every other logit were -inf (a grammar's mask). Returns -1 when no allowed
    // token is left (all of them banned by the logit bias).
    int32_t sample(std::span<const float> logits, std::span<const uint64_t> allowed = {});
    // Adds a token to the history the penalties see (prompt tokens and generated ones).
    void accept(int32_t token);
    // Forgets the token history (the RNG keeps its state).
    void clear_history() { history_.clear(); }
    // Forgets the history and restarts the RNG from the seed.
    void reset();

    const SamplingParams& params() const { return params_; }

    struct Candidate {
        int32_t id;
        float logit;
        float p;
    };

  private:
    // The logits that logit bias and penalties change, by ascending id (a few: the biased ids and
    // the recent tokens), computed as bias then penalties.
    std::vector<std::pair<int32_t, float>> adjusted_logits(std::span<const float> logits) const;
    // candidates_ = the k best adjusted logits, sorted (better() order in sampler.cpp).
    void select_best(std::span<const float> logits,
                     std::span<const std::pair<int32_t, float>> adjusted, std::size_t k,
                     std::span<const uint64_t> allowed);
    void softmax();  // sorts candidates by logit, descending, and fills p
    void typical(float p);
    void top_p(float p);
    void min_p(float p);

    SamplingParams params_;
    int32_t n_vocab_;
    std::mt19937_64 rng_;
    std::deque<int32_t> history_;
    std::vector<Candidate> candidates_;
    bool sorted_ = false;
};

}  // namespace minfer
