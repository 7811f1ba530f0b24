#include "hub/inventory.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/file_io.h"
#include "gguf/split_path.h"
#include "hub/ascii.h"
#include "hub/file_lock.h"
#include "hub/hf_cache.h"
#include "hub/ollama.h"
#include "hub/reference.h"
#include "hub/resolver.h"
#include "hub/url.h"
#include "hub/usage_record.h"

namespace minfer::hub {
namespace {

namespace fs = std::filesystem;

uint64_t file_size_or_zero(const fs::path& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) ? static_cast<uint64_t>(st.st_size)
                                                              : 0;
}

// The file a path finally names (a snapshot link's blob), for comparing uses.
std::string identity(const fs::path& p) {
    std::error_code ec;
    const auto real = fs::canonical(p, ec);
    return ec ? p.lexically_normal().string() : real.string();
}

std::vector<fs::path> subdirectories(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
        std::error_code e2;
        if (it->is_directory(e2) && !it->is_symlink(e2)) out.push_back(it->path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool is_gguf_model_name(const std::string& path) {
    const std::string lower = ascii_lower(path);
    const auto slash = lower.rfind('/');
    const std::string name = slash == std::string::npos ? lower : lower.substr(slash + 1);
    return lower.size() > 5 && lower.ends_with(".gguf") &&
           name.find("mmproj") == std::string::npos && name.find("imatrix") == std::string::npos;
}

// Branch and tag names under refs/ that point at `commit`.
std::vector<std::string> refs_to(const fs::path& repo_folder, const std::string& commit) {
    std::vector<std::string> names;
    const fs::path refs = repo_folder / "refs";
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(refs, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        std::error_code e2;
        if (it.depth() > 8 || !it->is_regular_file(e2)) continue;
        try {
            std::string text = read_file(it->path(), "a ref", 4096);
            while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
                text.pop_back();
            if (text == commit)
                names.push_back(it->path().lexically_relative(refs).generic_string());
        } catch (const Error&) {
        }
    }
    std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
        return (a == "main") != (b == "main") ? a == "main" : a < b;
    });
    return names;
}

void scan_hf_cache(const HubSettings& settings, std::vector<CachedModel>& out) {
    for (const auto& folder : subdirectories(settings.hf_cache)) {
        const std::string name = folder.filename().string();
        if (name.rfind("models--", 0) != 0) continue;
        const std::string rest = name.substr(8);
        const auto sep = rest.find("--");
        if (sep == std::string::npos) continue;
        const std::string repo = rest.substr(0, sep) + "/" + rest.substr(sep + 2);
        const HfRepoCache cache(settings.hf_cache, repo);
        for (const auto& snapshot : subdirectories(folder / "snapshots")) {
            const std::string commit = snapshot.filename().string();
            if (!is_commit_id(commit)) continue;
            // Group the snapshot's GGUF models (split sets as one).
            std::map<std::string, std::vector<std::string>> models;
            for (const auto& f : cache.snapshot_files(commit)) {
                if (!is_gguf_model_name(f.path)) continue;
                const auto split = parse_split_name(f.path);
                models[split && split->count > 1 ? concat(split->prefix, "\n", split->count)
                                                 : f.path]
                    .push_back(f.path);
            }
            const auto refs = refs_to(folder, commit);
            for (auto& [key, paths] : models) {
                std::sort(paths.begin(), paths.end());
                CachedModel m;
                std::string revision = refs.empty() ? commit : refs.front();
                HfReference ref;
                ref.repo = repo;
                if (revision != "main") {
                    ref.revision = revision;
                    ref.revision_given = true;
                }
                ref.file = paths.front();
                m.reference = to_string(ModelReference{ref});
                for (const auto& p : paths) {
                    m.files.push_back(cache.snapshot_path(commit, p));
                    m.size += file_size_or_zero(m.files.back());
                }
                out.push_back(std::move(m));
            }
        }
    }
}

void scan_ollama_store(const HubSettings& settings, std::vector<CachedModel>& out) {
    const auto url = parse_http_url(settings.ollama_registry);
    if (!url) return;
    const OllamaStore store(settings.minfer_cache / "ollama");
    const fs::path manifests = store.root() / "manifests" / url->authority();
    for (const auto& ns : subdirectories(manifests)) {
        for (const auto& name : subdirectories(ns)) {
            std::error_code ec;
            for (auto it = fs::directory_iterator(name, ec); !ec && it != fs::directory_iterator();
                 it.increment(ec)) {
                OllamaReference ref;
                ref.namespace_name = ns.filename().string();
                ref.name = name.filename().string();
                ref.tag = it->path().filename().string();
                const auto blob = store.find_model(url->authority(), ref);
                if (!blob) continue;
                CachedModel m;
                m.reference = to_string(ModelReference{ref});
                m.files = {*blob};
                m.size = file_size_or_zero(*blob);
                out.push_back(std::move(m));
            }
        }
    }
}

void scan_url_cache(const HubSettings& settings, std::vector<CachedModel>& out) {
    for (const auto& dir : subdirectories(settings.minfer_cache / "url")) {
        try {
            const auto j = nlohmann::json::parse(
                read_file(dir / "record.json", "a URL record", 1 << 16), nullptr, false);
            if (!j.is_object() || !j.contains("url") || !j["url"].is_string()) continue;
            const std::string url = j["url"].get<std::string>();
            const auto found = find_in_cache(parse_reference(url), settings);
            if (!found) continue;
            CachedModel m;
            m.reference = url;
            m.files = found->files;
            m.size = file_size_or_zero(found->path);
            out.push_back(std::move(m));
        } catch (const Error&) {
            // An unreadable record (or a URL the parser refuses) is not listed.
        }
    }
}

}  // namespace

std::vector<CachedModel> list_cached_models(const HubSettings& settings) {
    std::vector<CachedModel> scanned;
    scan_hf_cache(settings, scanned);
    scan_ollama_store(settings, scanned);
    scan_url_cache(settings, scanned);

    // The record's references take the place of derived ones for the same files.
    const auto usage = load_usage(settings.minfer_cache);
    std::vector<CachedModel> out;
    std::set<std::string> covered;
    for (const auto& e : usage) {
        std::error_code ec;
        if (!std::all_of(e.files.begin(), e.files.end(),
                         [](const fs::path& f) { return file_size_or_zero(f) > 0; }))
            continue;
        CachedModel m;
        m.reference = e.reference;
        m.files = e.files;
        for (const auto& f : e.files) m.size += file_size_or_zero(f);
        m.last_used = e.last_used;
        covered.insert(identity(e.files.front()));
        out.push_back(std::move(m));
    }
    for (auto& m : scanned)
        if (!covered.contains(identity(m.files.front()))) out.push_back(std::move(m));
    std::stable_sort(out.begin(), out.end(), [](const CachedModel& a, const CachedModel& b) {
        return a.last_used.value_or(-1) > b.last_used.value_or(-1);
    });
    return out;
}

namespace {

// The download locks of a cached reference's files (hub/download.h holds one from a download's
// first byte to its rename).
std::vector<fs::path> download_locks(const ModelReference& ref, const ResolvedModel& hit,
                                     const HubSettings& settings) {
    std::vector<fs::path> locks;
    if (const auto* h = std::get_if<HfReference>(&ref)) {
        const HfRepoCache cache(settings.hf_cache, h->repo);
        for (const auto& f : hit.files)
            locks.push_back(cache.lock_path(fs::path(identity(f)).filename().string()));
    } else if (std::holds_alternative<OllamaReference>(ref)) {
        const OllamaStore store(settings.minfer_cache / "ollama");
        const std::string blob = fs::path(identity(hit.path)).filename().string();  // sha256-HEX
        locks.push_back(store.lock_path(blob.substr(blob.find('-') + 1)));
    } else {
        locks.push_back(hit.path.parent_path() / ".lock");
    }
    return locks;
}

}  // namespace

Removal remove_cached_model(std::string_view text, const HubSettings& settings,
                            const std::function<void()>& on_wait, const std::atomic<bool>* cancel) {
    const ModelReference ref = parse_reference(text);
    if (std::holds_alternative<PathReference>(ref)) {
        throw UsageError(concat("'", text,
                                "': rm takes an hf:, ollama: or URL reference; minfer does not "
                                "delete files it did not download"));
    }
    const std::string canonical = to_string(ref);
    const auto hit = find_in_cache(ref, settings);
    if (!hit) throw IoError(concat(canonical, ": not in the cache"));
    if (hit->in_foreign_store) {
        throw UsageError(concat(canonical, ": is in ollama's own store (", hit->path.string(),
                                "); minfer only reads it: remove it with `ollama rm`"));
    }
    // A download of one of these files finishes before they go (it would otherwise rename its
    // blob into place after the removal).
    bool waited = false;
    std::vector<std::unique_ptr<FileLock>> held;
    for (const fs::path& lock : download_locks(ref, *hit, settings)) {
        held.push_back(std::make_unique<FileLock>(
            lock,
            [&] {
                if (!waited && on_wait) on_wait();
                waited = true;
            },
            cancel));
    }

    // What the other recorded references use: their paths, and the files those lead to.
    std::map<std::string, std::string> path_used_by, file_used_by;
    for (const auto& e : load_usage(settings.minfer_cache)) {
        if (e.reference == canonical) continue;
        for (const auto& f : e.files) {
            path_used_by.emplace(f.lexically_normal().string(), e.reference);
            file_used_by.emplace(identity(f), e.reference);
        }
    }

    Removal removal;
    const auto remove_file = [&](const fs::path& p) {
        std::error_code ec;
        const uint64_t size = file_size_or_zero(p);
        const bool is_link = fs::is_symlink(p, ec);
        if (fs::remove(p, ec)) {
            removal.removed.push_back(p);
            if (!is_link) removal.bytes_freed += size;
        }
    };

    if (const auto* h = std::get_if<HfReference>(&ref)) {
        const HfRepoCache cache(settings.hf_cache, h->repo);
        for (const auto& f : hit->files) {
            if (const auto it = path_used_by.find(f.lexically_normal().string());
                it != path_used_by.end()) {
                removal.kept.emplace_back(f, it->second);
                continue;
            }
            std::error_code ec;
            const std::string blob = identity(f);
            const bool is_link = fs::is_symlink(f, ec);
            remove_file(f);
            if (!is_link) continue;
            if (const auto it = file_used_by.find(blob); it != file_used_by.end()) {
                removal.kept.emplace_back(blob, it->second);
                continue;
            }
            // A snapshot minfer has no record of (huggingface-cli's) may still link the blob.
            bool linked = false;
            for (auto it = fs::recursive_directory_iterator(cache.folder() / "snapshots", ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
                std::error_code e2;
                if (it->is_symlink(e2) && identity(it->path()) == blob) {
                    linked = true;
                    removal.kept.emplace_back(
                        blob, concat("the snapshot file ",
                                     it->path().lexically_relative(cache.folder()).string()));
                    break;
                }
            }
            if (!linked) remove_file(blob);
        }
        // Empty snapshot directories go; a repository left without blobs goes entirely.
        std::error_code ec;
        for (const auto& snapshot : subdirectories(cache.folder() / "snapshots")) {
            bool has_files = false;
            for (auto it = fs::recursive_directory_iterator(snapshot, ec);
                 !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
                std::error_code e2;
                if (!it->is_directory(e2)) {
                    has_files = true;
                    break;
                }
            }
            if (!has_files) fs::remove_all(snapshot, ec);
        }
        const bool blobs_left = !fs::is_empty(cache.folder() / "blobs", ec) && !ec;
        if (!blobs_left && subdirectories(cache.folder() / "snapshots").empty()) {
            fs::remove_all(cache.folder(), ec);
            fs::remove_all(settings.hf_cache / ".locks" / repo_folder_name(h->repo), ec);
        }
    } else if (const auto* o = std::get_if<OllamaReference>(&ref)) {
        const OllamaStore store(settings.minfer_cache / "ollama");
        const auto url = parse_http_url(settings.ollama_registry);
        const std::string host = url ? url->authority() : "";
        std::error_code ec;
        fs::remove(store.manifest_path(host, *o), ec);
        const std::string id = identity(hit->path);
        // Another manifest of this store may use the same blob.
        bool shared = file_used_by.contains(id);
        for (auto it = fs::recursive_directory_iterator(store.root() / "manifests", ec);
             !shared && !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            std::error_code e2;
            if (!it->is_regular_file(e2)) continue;
            try {
                const auto layer =
                    parse_ollama_manifest(read_file(it->path(), "an ollama manifest", 1 << 20));
                shared = identity(store.blob_path(layer.sha256)) == id;
            } catch (const Error&) {
            }
        }
        if (shared) {
            const auto it = file_used_by.find(id);
            removal.kept.emplace_back(hit->path,
                                      it != file_used_by.end() ? it->second : "another ollama tag");
        } else {
            remove_file(hit->path);
        }
    } else {
        const fs::path dir = hit->path.parent_path();
        const std::string id = identity(hit->path);
        if (const auto it = file_used_by.find(id); it != file_used_by.end()) {
            removal.kept.emplace_back(hit->path, it->second);
        } else {
            remove_file(hit->path);
            std::error_code ec;
            fs::remove_all(dir, ec);
        }
    }
    forget_usage(settings.minfer_cache, {canonical});
    return removal;
}

}  // namespace minfer::hub
