#include "hub/usage_record.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/atomic_output_file.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"
#include "hub/file_lock.h"

namespace minfer::hub {
namespace {

constexpr std::size_t kMaxEntries = 10000;
constexpr std::size_t kMaxRecordBytes = std::size_t{8} << 20;

std::filesystem::path record_path(const std::filesystem::path& cache) {
    return cache / "models.json";
}

std::vector<UsageEntry> parse(const std::string& text) {
    std::vector<UsageEntry> entries;
    const auto j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("models") || !j["models"].is_array())
        throw FormatError("not a usage record");
    for (const auto& m : j["models"]) {
        if (!m.is_object() || !m.contains("reference") || !m["reference"].is_string() ||
            !m.contains("files") || !m["files"].is_array() || !m.contains("last_used") ||
            !m["last_used"].is_number_integer())
            continue;
        UsageEntry e;
        e.reference = m["reference"].get<std::string>();
        for (const auto& f : m["files"])
            if (f.is_string()) e.files.emplace_back(f.get<std::string>());
        e.last_used = m["last_used"].get<int64_t>();
        if (!e.files.empty()) entries.push_back(std::move(e));
        if (entries.size() == kMaxEntries) break;
    }
    return entries;
}

std::vector<UsageEntry> read_entries(const std::filesystem::path& cache) {
    const auto path = record_path(cache);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return {};
    try {
        return parse(read_file(path, "the usage record", kMaxRecordBytes));
    } catch (const Error& e) {
        log_warning(concat(path.string(), ": ignored (", e.what(), ")"));
        return {};
    }
}

void write_entries(const std::filesystem::path& cache, std::vector<UsageEntry> entries) {
    // The most recently used first; the oldest go when there are too many.
    std::sort(entries.begin(), entries.end(),
              [](const UsageEntry& a, const UsageEntry& b) { return a.last_used > b.last_used; });
    if (entries.size() > kMaxEntries) entries.resize(kMaxEntries);
    nlohmann::json models = nlohmann::json::array();
    for (const auto& e : entries) {
        nlohmann::json files = nlohmann::json::array();
        for (const auto& f : e.files) files.push_back(f.string());
        models.push_back(
            {{"reference", e.reference}, {"files", files}, {"last_used", e.last_used}});
    }
    const nlohmann::json doc = {{"version", 1}, {"models", models}};
    AtomicOutputFile out(record_path(cache));
    out.stream() << doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out.commit();
}

// Runs `change` on the entries under the record's lock; failures are warnings.
void update(const std::filesystem::path& cache,
            const std::function<void(std::vector<UsageEntry>&)>& change) {
    try {
        std::error_code ec;
        std::filesystem::create_directories(cache, ec);
        FileLock lock(cache / "models.json.lock", nullptr, nullptr);
        auto entries = read_entries(cache);
        change(entries);
        write_entries(cache, std::move(entries));
    } catch (const Error& e) {
        log_warning(
            concat("could not update the usage record in ", cache.string(), ": ", e.what()));
    }
}

}  // namespace

std::vector<UsageEntry> load_usage(const std::filesystem::path& minfer_cache) {
    return read_entries(minfer_cache);
}

void record_usage(const std::filesystem::path& minfer_cache, const std::string& reference,
                  const std::vector<std::filesystem::path>& files) {
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    update(minfer_cache, [&](std::vector<UsageEntry>& entries) {
        std::erase_if(entries, [&](const UsageEntry& e) { return e.reference == reference; });
        entries.push_back(UsageEntry{reference, files, now});
    });
}

void forget_usage(const std::filesystem::path& minfer_cache,
                  const std::vector<std::string>& references) {
    update(minfer_cache, [&](std::vector<UsageEntry>& entries) {
        std::erase_if(entries, [&](const UsageEntry& e) {
            std::error_code ec;
            return std::find(references.begin(), references.end(), e.reference) !=
                       references.end() ||
                   !std::filesystem::exists(e.files.front(), ec);
        });
    });
}

}  // namespace minfer::hub
