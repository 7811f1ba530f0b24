#pragma once
// What the caches hold, for `minfer list` and `minfer rm`. The caches are the truth (a model
// fetched by huggingface-cli is listed too); the usage record adds the references minfer was
// given and when each was last used.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hub/hub_settings.h"

namespace minfer::hub {

struct CachedModel {
    std::string reference;  // as recorded, else one derived from the cache (hf:o/r/FILE.gguf)
    std::vector<std::filesystem::path> files;
    uint64_t size = 0;
    std::optional<int64_t> last_used;  // seconds since the epoch; nullopt: never by minfer
};

// Every model in the HF cache (GGUF files of each snapshot, split sets as one), in minfer's
// ollama store and among its URL downloads, most recently used first.
std::vector<CachedModel> list_cached_models(const HubSettings& settings);

struct Removal {
    std::vector<std::filesystem::path> removed;  // files deleted (snapshot links and blobs)
    uint64_t bytes_freed = 0;
    // Files kept because another reference still uses them, with that reference.
    std::vector<std::pair<std::filesystem::path, std::string>> kept;
};

// Removes a reference's files from the cache, except those another recorded reference still
// uses, and forgets the reference. Never touches ollama's own store or local paths. Holds the
// download lock of each file it removes (the lock a download holds from its first byte to the
// rename): while another process downloads one of them, calls on_wait once and waits, checking
// `cancel` (Cancelled when set). A process that has the file mapped (a running serve) keeps its
// mapping. Throws UsageError for a local path, IoError when the reference is not in the cache.
Removal remove_cached_model(std::string_view reference, const HubSettings& settings,
                            const std::function<void()>& on_wait = {},
                            const std::atomic<bool>* cancel = nullptr);

}  // namespace minfer::hub
