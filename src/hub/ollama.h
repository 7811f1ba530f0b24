#pragma once
// ollama's registry and stores.
//   GET {registry}/v2/{namespace}/{name}/manifests/{tag}   a Docker manifest v2 whose layer of
//       media type application/vnd.ollama.image.model is the GGUF file
//   GET {registry}/v2/{namespace}/{name}/blobs/sha256:{hex} its bytes (after a redirect), checked
//       against the digest
// A store (ollama's own ~/.ollama/models, or minfer's MINFER_CACHE/ollama) holds
//   manifests/{registry host}/{namespace}/{name}/{tag}     the manifest as fetched
//   blobs/sha256-{hex}                                     the layers
// ollama's own stores are only read; its template, system and parameter layers are not used (the
// GGUF file carries its own chat template).

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "hub/reference.h"

namespace minfer::hub {

struct OllamaModelLayer {
    std::string sha256;  // lowercase hex
    uint64_t size = 0;
};

// The model layer of a manifest. FormatError for anything else than a Docker manifest v2 with
// exactly one model layer, a digest "sha256:" + 64 hex digits and a size.
OllamaModelLayer parse_ollama_manifest(std::string_view json);

class OllamaStore {
  public:
    explicit OllamaStore(std::filesystem::path root) : root_(std::move(root)) {}
    const std::filesystem::path& root() const { return root_; }

    std::filesystem::path manifest_path(std::string_view registry_host,
                                        const OllamaReference& ref) const;
    std::filesystem::path blob_path(std::string_view sha256) const;
    std::filesystem::path lock_path(std::string_view sha256) const;

    // The model blob when the manifest is here and its model blob has the announced size.
    std::optional<std::filesystem::path> find_model(std::string_view registry_host,
                                                    const OllamaReference& ref) const;

  private:
    std::filesystem::path root_;
};

}  // namespace minfer::hub
