#pragma once
// The small record behind `minfer list`'s "last used" and `minfer rm`'s "what another reference
// still uses": MINFER_CACHE/models.json, one entry per reference minfer resolved, with the files
// it led to. Updated under a lock (models.json.lock) and written atomically; it is a convenience,
// so a record that cannot be read or written is a warning, never an error.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace minfer::hub {

struct UsageEntry {
    std::string reference;  // canonical (hub/reference.h's to_string)
    std::vector<std::filesystem::path> files;
    int64_t last_used = 0;  // seconds since the epoch
};

std::vector<UsageEntry> load_usage(const std::filesystem::path& minfer_cache);
// Sets the entry of `reference` (files and now as last_used).
void record_usage(const std::filesystem::path& minfer_cache, const std::string& reference,
                  const std::vector<std::filesystem::path>& files);
// Drops the entries of these references and every entry whose first file is gone.
void forget_usage(const std::filesystem::path& minfer_cache,
                  const std::vector<std::string>& references);

}  // namespace minfer::hub
