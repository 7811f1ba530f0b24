// `minfer list [--json]`: the models in the caches, with the reference that names each, its
// size, its quantization and when minfer last used it.

#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.h"
#include "cli/format.h"
#include "core/error.h"
#include "core/terminal_text.h"
#include "gguf/gguf_file.h"
#include "hub/hub_settings.h"
#include "hub/inventory.h"
#include "hub/model_selection.h"
#include "quant/quant_mix.h"

namespace minfer::cli {
namespace {

// The tag in the file name, else the GGUF file's own general.file_type (ollama's blobs have no
// telling name); nullopt when neither says.
std::optional<std::string> quantization_of(const hub::CachedModel& m) {
    std::string tag = hub::quant_tag_of(m.files.front().filename().string());
    if (!tag.empty()) return tag;
    try {
        const GgufFile file = GgufFile::open(m.files.front());
        if (auto ft = file.metadata().get_int_optional("general.file_type")) {
            const std::string name(quant_mix_name(static_cast<QuantMix>(*ft)));
            if (name != "?") return name;
        }
    } catch (const Error&) {
    }
    return std::nullopt;
}

std::string iso_time(int64_t t) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return text;
}

std::string ago(int64_t t) {
    const auto now = static_cast<int64_t>(std::time(nullptr));
    const int64_t d = std::max<int64_t>(0, now - t);
    if (d < 60) return "just now";
    if (d < 3600) return concat(d / 60, " min ago");
    if (d < 86400) return concat(d / 3600, " h ago");
    return concat(d / 86400, " days ago");
}

std::string file_column(const hub::CachedModel& m) {
    std::string name = m.files.front().filename().string();
    if (m.files.size() > 1) name += concat(" (", m.files.size(), " parts)");
    return name;
}

}  // namespace

void add_list_command(CLI::App& app) {
    auto json = std::make_shared<bool>(false);
    CLI::App* cmd = app.add_subcommand(
        "list", "List the models in the caches: reference, file, size, quantization, last use");
    cmd->add_flag("--json", *json,
                  "One JSON array: reference, files, size (bytes), quantization (null when "
                  "unknown), last_used (ISO 8601, null when minfer never used it)");
    cmd->footer(
        "\nLists the GGUF models in the Hugging Face cache (those huggingface-cli fetched too), in "
        "minfer's ollama\nstore and among its URL downloads. REFERENCE is the one minfer was "
        "given, else one made from the cache;\nLAST USED comes from the record minfer keeps in "
        "MINFER_CACHE/models.json.\n");
    cmd->callback([json] {
        const auto settings = hub::HubSettings::from_environment();
        const auto models = hub::list_cached_models(settings);
        if (*json) {
            nlohmann::ordered_json out = nlohmann::ordered_json::array();
            for (const auto& m : models) {
                nlohmann::ordered_json files = nlohmann::ordered_json::array();
                for (const auto& f : m.files) files.push_back(f.string());
                const auto quantization = quantization_of(m);
                out.push_back(
                    {{"reference", m.reference},
                     {"files", files},
                     {"size", m.size},
                     {"quantization", quantization ? nlohmann::ordered_json(*quantization)
                                                   : nlohmann::ordered_json(nullptr)},
                     {"last_used", m.last_used ? nlohmann::ordered_json(iso_time(*m.last_used))
                                               : nlohmann::ordered_json(nullptr)}});
            }
            std::cout << out.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace)
                      << "\n";
            return;
        }
        if (models.empty()) {
            std::printf("no models in the caches (%s, %s)\n",
                        escape_for_terminal(settings.hf_cache.string()).c_str(),
                        escape_for_terminal(settings.minfer_cache.string()).c_str());
            return;
        }
        std::vector<std::array<std::string, 5>> rows;
        rows.push_back({"REFERENCE", "FILE", "SIZE", "QUANT", "LAST USED"});
        for (const auto& m : models) {
            rows.push_back({escape_for_terminal(m.reference), escape_for_terminal(file_column(m)),
                            format_mib(m.size),
                            escape_for_terminal(quantization_of(m).value_or("?")),
                            m.last_used ? ago(*m.last_used) : "never (not by minfer)"});
        }
        std::array<std::size_t, 5> width{};
        for (const auto& r : rows)
            for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
        for (const auto& r : rows) {
            std::string line;
            for (std::size_t i = 0; i < r.size(); ++i) {
                line += r[i];
                if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
            }
            std::printf("%s\n", line.c_str());
        }
    });
}

}  // namespace minfer::cli
