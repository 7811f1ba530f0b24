#include "golden.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"

namespace minfer::test {

std::vector<int32_t> GoldenCase::all_tokens() const {
    std::vector<int32_t> all = prompt_tokens;
    all.insert(all.end(), generated_tokens.begin(), generated_tokens.end());
    return all;
}

double Golden::tolerance() const {
    return 0.03 + std::max(2.0 * self_spread, 1.25 * cross_engine);
}

std::vector<int32_t> Golden::longest_text() const {
    std::vector<int32_t> text;
    for (const GoldenCase& c : cases) {
        if (c.all_tokens().size() > text.size()) text = c.all_tokens();
    }
    return text;
}

Golden load_golden(const std::filesystem::path& path) {
    std::ifstream in(path);
    const auto doc = nlohmann::json::parse(in);
    Golden g;
    g.model = doc.at("model").get<std::string>();
    g.n_vocab = doc.at("n_vocab").get<int64_t>();
    const auto& ref = doc.at("reference");
    g.self_spread = ref.at("self_spread").at("max_abs_logprob_where_p_gt_e-5").get<double>();
    g.cross_engine = ref.at("cross_engine").at("max_abs_logprob").get<double>();
    for (const auto& c : doc.at("cases")) {
        GoldenCase gc;
        gc.prompt = c.at("prompt").get<std::string>();
        gc.generated_text = c.at("generated_text").get<std::string>();
        gc.prompt_tokens = c.at("prompt_tokens").get<std::vector<int32_t>>();
        gc.generated_tokens = c.at("generated_tokens").get<std::vector<int32_t>>();
        for (const auto& p : c.at("positions")) {
            GoldenPosition gp;
            gp.logsumexp = p.at("logsumexp").get<double>();
            for (const auto& t : p.at("top"))
                gp.top.emplace_back(t.at(0).get<int32_t>(), t.at(1).get<float>());
            gc.positions.push_back(std::move(gp));
        }
        g.cases.push_back(std::move(gc));
    }
    return g;
}

double max_logprob_deviation(const GoldenPosition& ref, std::span<const float> logits) {
    const float max = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l) - max);
    const double lse = max + std::log(sum);
    double worst = 0;
    for (const auto& [id, logit] : ref.top) {
        const double ours = logits[static_cast<std::size_t>(id)] - lse;
        const double theirs = logit - ref.logsumexp;
        worst = std::max(worst, std::abs(ours - theirs));
    }
    return worst;
}

double routing_tolerance(const Golden& golden) {
    // "tiny-qwen3moe-f16.gguf" -> golden/tiny-qwen3moe-q8_0.json beside it.
    const std::string& model = golden.model;
    const auto dash = model.rfind('-');
    if (dash == std::string::npos) return golden.tolerance();
    const std::filesystem::path sibling =
        fixture_path("golden/" + model.substr(0, dash) + "-q8_0.json");
    if (!std::filesystem::exists(sibling)) return golden.tolerance();
    return load_golden(sibling).tolerance();
}

std::string golden_name(const std::string& file) {
    std::string name = file.substr(0, file.size() - 5);
    for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
}

}  // namespace minfer::test
