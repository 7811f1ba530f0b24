#include "cli/sampling_flags.h"

#include <charconv>
#include <cmath>
#include <random>

#include "core/error.h"
#include "core/log.h"

namespace minfer::cli {

void add_sampling_flags(CLI::App* cmd, SamplingFlags& f) {
    SamplingParams& p = f.params;
    cmd->add_option("--temp", p.temperature, "Temperature; 0 = greedy (the most likely token)")
        ->capture_default_str();
    // Options that only shape a random draw: with --temp 0 they do nothing, which is said.
    f.draw_options = {
        cmd->add_option("--top-k", p.top_k, "Keep the K most likely tokens (0 = off)")
            ->capture_default_str(),
        cmd->add_option("--top-p", p.top_p,
                        "Keep the smallest set of tokens with probability >= P (1 = off)")
            ->capture_default_str(),
        cmd->add_option("--min-p", p.min_p,
                        "Drop tokens below P x the best token's probability (0 = off)")
            ->capture_default_str(),
        cmd->add_option("--typical-p", p.typical_p, "Locally typical sampling (1 = off)")
            ->capture_default_str(),
    };
    cmd->add_option("--repeat-penalty", p.repeat_penalty, "Penalty for repeated tokens (1 = off)")
        ->capture_default_str();
    cmd->add_option("--repeat-last-n", p.penalty_last_n,
                    "Tokens the penalties look back at (-1 = all)")
        ->capture_default_str();
    cmd->add_option("--presence-penalty", p.presence_penalty, "Subtracted once from seen tokens")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", p.frequency_penalty,
                    "Subtracted per occurrence from seen tokens")
        ->capture_default_str();
    cmd->add_option("--logit-bias", f.logit_bias,
                    "Bias a token: ID+BIAS, ID-BIAS or ID-inf (repeatable)")
        ->allow_extra_args(false);  // one value each time: a MODEL may follow
    f.draw_options.push_back(
        cmd->add_option("-s,--seed", f.seed, "Random seed, 0 to 2^64-1 (-1 = random)")
            ->capture_default_str());
}

namespace {

std::pair<int32_t, float> parse_logit_bias(const std::string& text) {
    const std::size_t sign = text.find_first_of("+-=", 1);
    try {
        if (sign == std::string::npos) throw std::invalid_argument(text);
        std::size_t used = 0;
        const int id = std::stoi(text.substr(0, sign), &used);
        if (used != sign || id < 0) throw std::invalid_argument(text);
        const std::string value = text.substr(sign + 1);
        float bias;
        if (value == "inf") {
            bias = INFINITY;
        } else {
            bias = std::stof(value, &used);
            // "nan" and "inf" spelled otherwise: a bias must be a number (or exactly "inf").
            if (used != value.size() || !std::isfinite(bias)) throw std::invalid_argument(text);
        }
        return {id, text[sign] == '-' ? -bias : bias};
    } catch (const std::exception&) {
        throw UsageError(concat("--logit-bias '", text,
                                "': expected ID+BIAS, ID-BIAS or ID-inf, e.g. 15043+1.5"));
    }
}

// "-1" (random) or a number 0 .. 2^64-1.
uint64_t parse_seed(const std::string& text) {
    if (text == "-1") {
        std::random_device device;
        return (uint64_t{device()} << 32) | device();
    }
    uint64_t seed = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seed);
    if (text.empty() || error != std::errc{} || end != text.data() + text.size()) {
        throw UsageError(
            concat("--seed '", text, "': expected -1 (random) or a number from 0 to 2^64-1"));
    }
    return seed;
}

}  // namespace

SamplingParams to_sampling_params(const SamplingFlags& f, SamplingFlagsUse use) {
    SamplingParams p = f.params;
    for (const auto& item : f.logit_bias) {
        const auto [id, bias] = parse_logit_bias(item);
        p.logit_bias[id] += bias;
    }
    p.seed = parse_seed(f.seed);
    p.validate();
    // A server's requests may set their own temperature: its --top-k still applies to them.
    if (p.temperature == 0.0f && use == SamplingFlagsUse::Generation) {
        for (const CLI::Option* option : f.draw_options) {
            if (option->count() > 0) {
                log_warning(concat(option->get_name(), " has no effect with --temp 0 (greedy)"));
            }
        }
    }
    return p;
}

}  // namespace minfer::cli
