#include "server/model_catalog.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "hub/inventory.h"
#include "hub/reference.h"

namespace minfer::server {
namespace {

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() &&
           std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) ==
                      std::tolower(static_cast<unsigned char>(b));
           });
}

// A name as compared: lower case, without the prefixes that say where it comes from
// ("hf:", "hf.co/", "ollama:", "library/") and without ollama's default tag ":latest".
std::string normalized(std::string_view name) {
    std::string s(name);
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (std::string_view prefix : {"hf:", "hf.co/", "huggingface.co/", "ollama:",
                                    "registry.ollama.ai/", "library/"}) {
        if (s.starts_with(prefix)) s.erase(0, prefix.size());
    }
    constexpr std::string_view kLatest = ":latest";
    if (s.ends_with(kLatest)) s.resize(s.size() - kLatest.size());
    return s;
}

std::string stem_of(std::string_view file) {
    std::filesystem::path p{std::string(file)};
    std::string name = p.filename().string();
    if (name.empty()) name = p.parent_path().filename().string();
    if (name.size() > 5 && name.ends_with(".gguf")) name.resize(name.size() - 5);
    return name.empty() ? std::string("model") : name;
}

// An ollama model name as its clients write it: [NAMESPACE/]NAME[:TAG].
bool looks_like_ollama_name(std::string_view s) {
    if (s.empty() || !std::isalnum(static_cast<unsigned char>(s.front()))) return false;
    int slashes = 0, colons = 0;
    for (const char c : s) {
        if (c == '/') {
            if (++slashes > 1 || colons > 0) return false;
        } else if (c == ':') {
            if (++colons > 1) return false;
        } else if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' &&
                   c != '-') {
            return false;
        }
    }
    return true;
}

}  // namespace

std::string model_id_for(std::string_view reference) {
    const hub::ModelReference parsed = hub::parse_reference(reference);
    if (const auto* hf = std::get_if<hub::HfReference>(&parsed)) {
        std::string id = hf->repo;
        if (hf->revision_given) id += "@" + hf->revision;
        if (!hf->file.empty()) return id + "/" + hf->file;
        return hf->quant.empty() ? id : id + ":" + hf->quant;
    }
    if (const auto* o = std::get_if<hub::OllamaReference>(&parsed)) {
        const std::string ns = o->namespace_name == "library" ? "" : o->namespace_name + "/";
        return ns + o->name + ":" + o->tag;
    }
    if (const auto* url = std::get_if<hub::UrlReference>(&parsed)) return stem_of(url->file_name);
    return stem_of(std::get<hub::PathReference>(parsed).path);
}

std::optional<std::string> pull_reference_for(std::string_view name) {
    std::string reference;
    if (starts_with_nocase(name, "hf.co/"))
        reference = concat("hf:", name.substr(6));
    else if (starts_with_nocase(name, "huggingface.co/"))
        reference = concat("hf:", name.substr(15));
    else if (hub::looks_remote(name))
        reference = std::string(name);
    else if (looks_like_ollama_name(name))
        reference = concat("ollama:", name);
    else
        return std::nullopt;
    try {
        if (!hub::is_remote(hub::parse_reference(reference))) return std::nullopt;
    } catch (const UsageError&) {
        return std::nullopt;
    }
    return reference;
}

std::vector<CatalogEntry> cached_catalog_entries(const hub::HubSettings& settings) {
    std::vector<CatalogEntry> out;
    for (const hub::CachedModel& m : hub::list_cached_models(settings)) {
        if (m.files.empty()) continue;
        try {
            model_id_for(m.reference);  // a record minfer cannot parse is left out
        } catch (const UsageError&) {
            continue;
        }
        out.push_back({.id = {}, .reference = m.reference, .file = m.files[0], .in_cache = true,
                       .settings = {}});
    }
    return out;
}

std::string ModelCatalog::add(CatalogEntry entry, std::string* note) {
    for (CatalogEntry& e : entries_) {
        if (e.reference != entry.reference) continue;
        if (entry.in_cache) {  // downloaded since it was added
            e.in_cache = true;
            e.file = entry.file;
        }
        return e.id;
    }
    const std::string base = entry.id.empty() ? model_id_for(entry.reference) : entry.id;
    std::string id = base;
    for (int n = 2; find_id(id) != nullptr; ++n) id = concat(base, "-", n);
    if (id != base && note != nullptr) {
        *note = concat("two models would be named '", base, "': ", entry.reference,
                       " is served as '", id, "'");
    }
    entry.id = id;
    entries_.push_back(std::move(entry));
    return id;
}

bool ModelCatalog::set_settings(std::string_view id, const ModelSettings& settings) {
    for (CatalogEntry& e : entries_) {
        if (e.id != id) continue;
        e.settings = settings;
        return true;
    }
    return false;
}

bool ModelCatalog::remove(std::string_view id) {
    const auto it = std::find_if(entries_.begin(), entries_.end(),
                                 [&](const CatalogEntry& e) { return e.id == id; });
    if (it == entries_.end()) return false;
    entries_.erase(it);
    return true;
}

const CatalogEntry* ModelCatalog::find_id(std::string_view id) const {
    for (const CatalogEntry& e : entries_) {
        if (e.id == id) return &e;
    }
    return nullptr;
}

const CatalogEntry* ModelCatalog::find(std::string_view name) const {
    if (const CatalogEntry* exact = find_id(name)) return exact;
    const std::string wanted = normalized(name);
    for (const CatalogEntry& e : entries_) {
        if (normalized(e.id) == wanted) return &e;
        if (hub::looks_remote(e.reference) && normalized(e.reference) == wanted) return &e;
    }
    return nullptr;
}

}  // namespace minfer::server
