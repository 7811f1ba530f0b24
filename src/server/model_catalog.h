#pragma once
// The models a server offers and the names clients may use for them. Each has an id, the name
// /v1/models, /api/tags and the chat page show: OWNER/REPO:QUANT for a Hugging Face model,
// NAME:TAG for ollama's, the file's stem for a path or URL. Two that would share an id get a
// suffix (-2, -3, ...), and the catalogue says so. A request may name a model by its id or by the
// reference it was pulled with, written as minfer or ollama write it: "hf:o/r:Q4_K_M",
// "hf.co/o/r:Q4_K_M" and "o/r:q4_k_m" name one model, as do "ollama:qwen2.5:0.5b" and
// "qwen2.5:0.5b", and "phi3" and "phi3:latest" (names compare without case). A name is only ever
// looked up here: it is never opened as a path.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hub/hub_settings.h"

namespace minfer::server {

// What `--model-options` sets for one model instead of the server's own flags.
struct ModelSettings {
    std::optional<int64_t> ctx;             // --ctx
    std::optional<int> n_parallel;          // -np
    std::optional<int64_t> kv_tokens;       // --kv-cache-tokens
    std::optional<std::string> cache_type;  // --cache-type
};

struct CatalogEntry {
    std::string id;
    std::string reference;  // what loading takes: a path, or an hf:/ollama:/URL reference
    // The GGUF file (a split model's first part) when it is on disk; nullopt for a reference
    // given on the command line whose file is not downloaded yet.
    std::optional<std::filesystem::path> file;
    bool in_cache = false;  // found in the caches (so /api/delete may remove it)
    ModelSettings settings;
};

// The id a reference is listed under (UsageError for a malformed reference).
std::string model_id_for(std::string_view reference);

// For a name a client sent that no entry has: the reference to pull it by (`hf.co/o/r:Q` ->
// "hf:o/r:Q", `qwen2.5:0.5b` -> "ollama:qwen2.5:0.5b", hf:/ollama:/URL references as they are),
// or nullopt when the name cannot be pulled (a path, or malformed).
std::optional<std::string> pull_reference_for(std::string_view name);

// The models the caches hold (`minfer list`), as catalogue entries.
std::vector<CatalogEntry> cached_catalog_entries(const hub::HubSettings& settings);

class ModelCatalog {
  public:
    // Adds a model under entry.id (--alias), else model_id_for(reference), suffixed when that id is
    // taken; a reference already listed is not added again (when `entry` is in the cache, the
    // listed one now is too). Returns the entry's id; `note` (when given) receives a sentence when
    // the id had to be suffixed.
    std::string add(CatalogEntry entry, std::string* note = nullptr);
    // Gives the entry with this id its own settings; false when there is none.
    bool set_settings(std::string_view id, const ModelSettings& settings);
    // Removes the entry with this id; false when there is none.
    bool remove(std::string_view id);
    // The entry a client's name means, as the header says; nullptr when none.
    const CatalogEntry* find(std::string_view name) const;
    const CatalogEntry* find_id(std::string_view id) const;
    const std::vector<CatalogEntry>& entries() const { return entries_; }

  private:
    std::vector<CatalogEntry> entries_;
};

}  // namespace minfer::server
