#include "hub/ollama.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"

namespace minfer::hub {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kModelMediaType = "application/vnd.ollama.image.model";
constexpr std::size_t kMaxLayers = 256;
constexpr uint64_t kMaxSize = uint64_t{1} << 53;

}  // namespace

OllamaModelLayer parse_ollama_manifest(std::string_view json) {
    Json j;
    try {
        j = Json::parse(json, [](int depth, Json::parse_event_t, Json&) {
            if (depth > 16) throw FormatError("nested too deeply");
            return true;
        });
    } catch (const Json::exception& e) {
        throw FormatError(concat("the ollama manifest is not valid JSON (", e.what(), ")"));
    } catch (const FormatError& e) {
        throw FormatError(concat("the ollama manifest is not usable JSON (", e.what(), ")"));
    }
    if (!j.is_object()) throw FormatError("the ollama manifest is not a JSON object");
    const auto version = j.find("schemaVersion");
    if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != 2)
        throw FormatError("the ollama manifest is not a Docker manifest v2 (schemaVersion 2)");
    const auto layers = j.find("layers");
    if (layers == j.end() || !layers->is_array() || layers->size() > kMaxLayers)
        throw FormatError("the ollama manifest has no list of layers");
    std::optional<OllamaModelLayer> model;
    for (const Json& layer : *layers) {
        if (!layer.is_object()) throw FormatError("the ollama manifest has a non-object layer");
        const auto type = layer.find("mediaType");
        if (type == layer.end() || !type->is_string() ||
            type->get<std::string>() != kModelMediaType)
            continue;
        if (model) throw FormatError("the ollama manifest has more than one model layer");
        const auto digest = layer.find("digest");
        const auto size = layer.find("size");
        if (digest == layer.end() || !digest->is_string())
            throw FormatError("the ollama manifest's model layer has no digest");
        const std::string d = digest->get<std::string>();
        if (d.size() != 71 || d.rfind("sha256:", 0) != 0 || !is_sha256_hex(d.substr(7))) {
            throw FormatError(concat("the ollama manifest's model digest '", d.substr(0, 100),
                                     "' is not sha256: and 64 lowercase hex digits"));
        }
        if (size == layer.end() || !size->is_number_unsigned() || size->get<uint64_t>() > kMaxSize)
            throw FormatError("the ollama manifest's model layer has no usable size");
        model = OllamaModelLayer{d.substr(7), size->get<uint64_t>()};
    }
    if (!model) {
        throw FormatError(concat("the ollama manifest has no layer of type ", kModelMediaType,
                                 " (not a model?)"));
    }
    return *model;
}

std::filesystem::path OllamaStore::manifest_path(std::string_view registry_host,
                                                 const OllamaReference& ref) const {
    return root_ / "manifests" / std::string(registry_host) / ref.namespace_name / ref.name /
           ref.tag;
}

std::filesystem::path OllamaStore::blob_path(std::string_view sha256) const {
    return root_ / "blobs" / concat("sha256-", sha256);
}

std::filesystem::path OllamaStore::lock_path(std::string_view sha256) const {
    return root_ / ".locks" / concat("sha256-", sha256, ".lock");
}

std::optional<std::filesystem::path> OllamaStore::find_model(std::string_view registry_host,
                                                             const OllamaReference& ref) const {
    const auto manifest = manifest_path(registry_host, ref);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(manifest, ec)) return std::nullopt;
    OllamaModelLayer layer;
    try {
        layer = parse_ollama_manifest(read_file(manifest, "an ollama manifest", 1 << 20));
    } catch (const Error&) {
        return std::nullopt;
    }
    const auto blob = blob_path(layer.sha256);
    struct stat st {};
    if (::stat(blob.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) != layer.size)
        return std::nullopt;
    return blob;
}

}  // namespace minfer::hub
