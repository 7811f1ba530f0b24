#pragma once
// Turns a model reference (hub/reference.h) into the GGUF file to open, downloading what is
// missing. This is the first stage of the pipeline; runtime's load_model and every command that
// takes MODEL go through it.
//
// Two modes:
//   CacheFirst  (run, chat, serve, info, ...): a reference whose files are all in the cache
//               resolves without any request, so a model pulled once works offline and starts
//               at once; only what is missing is fetched.
//   Refresh     (pull): ask the hub which commit the revision names now, the registry for the
//               manifest, the server whether a URL changed (ETag), and fetch what is new; when
//               the server cannot be reached, a cached copy is the answer (`unchecked` says so).
// With HF_HUB_OFFLINE set no request is made in either mode: what is not cached is an error.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hub/download.h"
#include "hub/hub_settings.h"
#include "hub/reference.h"

namespace minfer::hub {

enum class ResolveMode { CacheFirst, Refresh };

struct ResolvedModel {
    std::filesystem::path path;                // what to open: the file, or a split's part 1
    std::vector<std::filesystem::path> files;  // every file of the model
    std::string reference;                     // canonical; empty for a local path
    bool downloaded = false;                   // something was fetched in this call
    std::string revision_note;                 // "commit 0123abcd" etc., for pull's message
    bool in_foreign_store = false;             // ollama's own store: read, never changed
    // Refresh only: the server could not be reached, so this is the cached copy, not checked for
    // a newer one; says why ("connection refused ..."). Empty when the server answered.
    std::string unchecked;
};

// Throws IoError (NetworkError, HttpError) for what could not be fetched, FormatError for a
// server's bad answer or a checksum mismatch, Cancelled on Ctrl-C. A local path resolves as
// resolve_model_path does, without touching any cache.
ResolvedModel resolve_model(const ModelReference& reference, const HubSettings& settings,
                            ResolveMode mode, const DownloadEvents& events);

// The same with HubSettings::from_environment(), read only for a remote reference (a local path
// works whatever the environment says).
ResolvedModel resolve_model(const ModelReference& reference, ResolveMode mode,
                            const DownloadEvents& events);

// The reference's files when they are all in a cache: no request, no change to the usage record.
// nullopt for a local path or what is not (wholly) cached.
std::optional<ResolvedModel> find_in_cache(const ModelReference& reference,
                                           const HubSettings& settings);

}  // namespace minfer::hub
