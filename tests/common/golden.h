#pragma once
// Reads ../shared/fixtures/golden/MODEL.json (format in ../shared/README.md) and compares our
// logits with the reference's under the forward-pass issue's tolerance.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace minfer::test {

struct GoldenPosition {
    double logsumexp = 0;
    std::vector<std::pair<int32_t, float>> top;  // reference top-10 (id, logit), best first
    double margin() const { return top.size() < 2 ? 1e9 : top[0].second - top[1].second; }
};

struct GoldenCase {
    std::string prompt;
    std::string generated_text;  // invalid UTF-8 shown as U+FFFD; the ids are authoritative
    std::vector<int32_t> prompt_tokens;
    std::vector<int32_t> generated_tokens;
    std::vector<GoldenPosition> positions;  // one per token of prompt_tokens + generated_tokens
    std::vector<int32_t> all_tokens() const;
};

struct Golden {
    std::string model;  // file name under fixtures/models
    int64_t n_vocab = 0;
    double self_spread = 0;   // reference.self_spread.max_abs_logprob_where_p_gt_e-5
    double cross_engine = 0;  // reference.cross_engine.max_abs_logprob
    std::vector<GoldenCase> cases;
    // 0.03 + max(2 x self_spread, 1.25 x cross_engine)
    double tolerance() const;
    // The tokens (prompt and generated) of the longest case.
    std::vector<int32_t> longest_text() const;
};

Golden load_golden(const std::filesystem::path& path);

// The golden files of the architectures minfer runs (the parity tests go over all of them).
inline const std::vector<std::string> kRunnableGoldenFiles = {
    "stories260K.json",       "tiny-llama-f16.json",    "tiny-llama-q8_0.json",
    "tiny-llama-q4_0.json",   "tiny-llama-q4_k_m.json", "tiny-qwen2-f16.json",
    "tiny-qwen2-q8_0.json",   "tiny-qwen2-q4_k_m.json", "tiny-qwen3-q8_0.json",
    "tiny-gemma2-f16.json",   "tiny-gemma2-q8_0.json",  "tiny-gemma3-f16.json",
    "tiny-gemma3-q8_0.json",  "tiny-phi3-f16.json",     "tiny-phi3-q8_0.json",
    "tiny-mixtral-f16.json",  "tiny-mixtral-q8_0.json", "tiny-qwen3moe-f16.json",
    "tiny-qwen3moe-q8_0.json"};

// For a mixture-of-experts golden file: the tolerance of its family's q8_0 golden, whose
// cross-engine figure measures what choosing other experts at router near-ties costs (the f16
// golden's own tolerance if there is no q8_0 one).
double routing_tolerance(const Golden& golden);

// A test-name-safe name of a golden file: "tiny-llama-q4_0.json" -> "tiny_llama_q4_0".
std::string golden_name(const std::string& file);

// Largest |our log-probability - reference log-probability| over the reference's top tokens at
// one position, given our full logits row.
double max_logprob_deviation(const GoldenPosition& ref, std::span<const float> logits);

}  // namespace minfer::test
