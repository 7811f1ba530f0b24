#include "hub/resolver.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "gguf/gguf_file.h"
#include "gguf/split_path.h"
#include "hub/cache_file.h"
#include "hub/hf_api.h"
#include "hub/hf_cache.h"
#include "hub/model_selection.h"
#include "hub/ollama.h"
#include "hub/reference.h"
#include "hub/url.h"
#include "hub/usage_record.h"

namespace minfer::hub {
namespace {

void notice(const DownloadEvents& events, const std::string& text) {
    if (events.on_notice) events.on_notice(text);
}

std::function<void(const std::string&, double)> retry_notice(const DownloadEvents& events) {
    return [&events](const std::string& what, double wait) {
        notice(events, concat(what, "; retrying in ", wait, " s"));
    };
}

std::vector<std::string> paths_of(const std::vector<RepoFile>& files) {
    std::vector<std::string> paths;
    paths.reserve(files.size());
    for (const auto& f : files) paths.push_back(f.path);
    return paths;
}

const RepoFile* find_file(const std::vector<RepoFile>& files, std::string_view path) {
    for (const auto& f : files)
        if (f.path == path) return &f;
    return nullptr;
}

bool regular_file_of_size(const std::filesystem::path& path, std::optional<uint64_t> size) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           (!size || static_cast<uint64_t>(st.st_size) == *size);
}

ResolvedModel finish(const HubSettings& settings, std::string reference,
                     std::vector<std::filesystem::path> files, bool downloaded, std::string note) {
    ResolvedModel r;
    r.path = files.front();
    r.files = std::move(files);
    r.reference = std::move(reference);
    r.downloaded = downloaded;
    r.revision_note = std::move(note);
    record_usage(settings.minfer_cache, r.reference, r.files);
    return r;
}

// pull (Refresh) when the server cannot be reached: a cached copy is the answer, marked as not
// checked for a newer one (other commands use it without asking anyway); without one, the error.
ResolvedModel cached_when_unreachable(const NetworkError& e, std::optional<ResolvedModel> cached) {
    if (!cached) throw e;
    cached->unchecked = e.what();
    return std::move(*cached);
}

// ---- Hugging Face ----

struct HfCacheHit {
    std::string commit;
    std::vector<std::filesystem::path> files;
};

// The reference's files when they are all in the cache (linking blobs already there when the
// saved file list names them). Selection errors are thrown when the file list is the whole
// repository's (they would be the same online) or when offline; otherwise nullopt.
std::optional<HfCacheHit> hf_from_cache(const HfReference& ref, const std::string& canonical,
                                        const HfRepoCache& cache, const HubSettings& settings) {
    const auto commit = cache.commit_for(ref.revision);
    if (!commit) return std::nullopt;
    auto listing = load_listing(settings.minfer_cache, ref.repo, *commit);
    const bool whole_listing = listing.has_value();
    if (!listing) listing = cache.snapshot_files(*commit);
    std::vector<std::string> chosen;
    try {
        chosen = select_model_files(paths_of(*listing), ref.quant, ref.file, canonical);
    } catch (const Error&) {
        if (whole_listing || settings.offline) throw;
        return std::nullopt;
    }
    HfCacheHit hit{*commit, {}};
    for (const auto& path : chosen) {
        const RepoFile* f = find_file(*listing, path);
        if (f == nullptr) return std::nullopt;
        if (!cache.has_file(*commit, path, f->size)) {
            // A blob fetched for another commit (or by another tool) can be linked offline.
            if (!whole_listing || !regular_file_of_size(cache.blob_path(f->blob_id), f->size))
                return std::nullopt;
            cache.link(*commit, path, f->blob_id);
        }
        hit.files.push_back(cache.snapshot_path(*commit, path));
    }
    return hit;
}

ResolvedModel resolve_hf(const HfReference& ref, const HubSettings& settings, ResolveMode mode,
                         const DownloadEvents& events) {
    const std::string canonical = to_string(ModelReference{ref});
    const HfRepoCache cache(settings.hf_cache, ref.repo);
    if (mode == ResolveMode::CacheFirst || settings.offline) {
        if (auto hit = hf_from_cache(ref, canonical, cache, settings))
            return finish(settings, canonical, std::move(hit->files), false,
                          concat("commit ", hit->commit.substr(0, 12)));
        if (settings.offline) {
            throw IoError(concat(canonical, ": not in the cache (", settings.hf_cache.string(),
                                 ") and HF_HUB_OFFLINE is set, so nothing is downloaded"));
        }
    }

    HttpClient client(settings.transfer);
    HfApi api(client, settings, events.cancel, retry_notice(events));
    std::string commit;
    try {
        commit = api.commit_of(ref.repo, ref.revision, canonical);
    } catch (const NetworkError& e) {
        // CacheFirst came here because the files are not (all) cached.
        std::optional<HfCacheHit> hit;
        try {
            if (mode == ResolveMode::Refresh) hit = hf_from_cache(ref, canonical, cache, settings);
        } catch (const Error&) {
        }
        if (!hit) throw;
        return cached_when_unreachable(e, finish(settings, canonical, std::move(hit->files), false,
                                                 concat("commit ", hit->commit.substr(0, 12))));
    }
    auto listing = load_listing(settings.minfer_cache, ref.repo, commit);
    if (!listing) {
        listing = api.list_files(ref.repo, commit, canonical);
        save_listing(settings.minfer_cache, ref.repo, commit, *listing);
    }
    const auto chosen = select_model_files(paths_of(*listing), ref.quant, ref.file, canonical);

    std::vector<const RepoFile*> missing;
    uint64_t missing_bytes = 0;
    for (const auto& path : chosen) {
        const RepoFile* f = find_file(*listing, path);
        if (!cache.has_file(commit, path, f->size) &&
            !regular_file_of_size(cache.blob_path(f->blob_id), f->size)) {
            missing.push_back(f);
            missing_bytes += f->size;
        }
    }
    if (missing_bytes > 0) require_free_space(cache.folder(), missing_bytes, canonical);

    bool downloaded = false;
    std::vector<std::filesystem::path> files;
    for (const auto& path : chosen) {
        const RepoFile& f = *find_file(*listing, path);
        if (!cache.has_file(commit, path, f.size)) {
            DownloadTarget target;
            target.name = f.path;
            target.path = cache.blob_path(f.blob_id);
            target.lock = cache.lock_path(f.blob_id);
            target.size = f.size;
            target.digest = f.digest;
            const std::string what = concat("file '", f.path, "'");
            const auto result = download_file(
                client, settings.transfer,
                [&] { return api.file_request(ref.repo, commit, f.path); },
                [&](const HttpResponse& r) { api.throw_for_status(r, ref.repo, canonical, what); },
                target, events);
            downloaded = downloaded || result.fetched;
            cache.link(commit, f.path, f.blob_id);
        }
        files.push_back(cache.snapshot_path(commit, path));
    }
    cache.write_ref(ref.revision, commit);
    return finish(settings, canonical, std::move(files), downloaded,
                  concat("commit ", commit.substr(0, 12)));
}

// ---- ollama ----

std::string registry_host(const HubSettings& settings) {
    const auto url = parse_http_url(settings.ollama_registry);
    if (!url) throw UsageError("MINFER_OLLAMA_REGISTRY is not a URL");
    return url->authority();
}

std::optional<ResolvedModel> ollama_from_cache(const OllamaReference& ref,
                                               const HubSettings& settings) {
    const std::string host = registry_host(settings);
    ResolvedModel r;
    r.reference = to_string(ModelReference{ref});
    if (auto blob = OllamaStore(settings.minfer_cache / "ollama").find_model(host, ref)) {
        r.path = *blob;
    } else {
        for (const auto& root : settings.ollama_stores) {
            if (auto theirs = OllamaStore(root).find_model(host, ref)) {
                r.path = *theirs;
                r.in_foreign_store = true;
                break;
            }
        }
    }
    if (r.path.empty()) return std::nullopt;
    r.files = {r.path};
    return r;
}

ResolvedModel resolve_ollama(const OllamaReference& ref, const HubSettings& settings,
                             ResolveMode mode, const DownloadEvents& events) {
    const std::string canonical = to_string(ModelReference{ref});
    const std::string host = registry_host(settings);
    const OllamaStore ours(settings.minfer_cache / "ollama");
    if (mode == ResolveMode::CacheFirst || settings.offline) {
        if (auto hit = ollama_from_cache(ref, settings)) {
            return finish(settings, canonical, hit->files, false,
                          hit->in_foreign_store ? "from ollama's store" : "");
        }
        if (settings.offline) {
            throw IoError(concat(canonical, ": not in minfer's cache (", ours.root().string(),
                                 ") nor in ollama's, and HF_HUB_OFFLINE is set, so nothing is "
                                 "downloaded"));
        }
    }

    HttpClient client(settings.transfer);
    const std::string base =
        concat(settings.ollama_registry, "/v2/", ref.namespace_name, "/", ref.name);
    HttpRequest manifest_request;
    manifest_request.url = concat(base, "/manifests/", ref.tag);
    manifest_request.headers.emplace_back(
        "Accept: application/vnd.docker.distribution.manifest.v2+json");
    const auto throw_for_status = [&](const HttpResponse& r, std::string_view what) {
        if (r.status == 404) {
            throw HttpError(concat(canonical, ": ", what, " is not in the registry ",
                                   settings.ollama_registry, " (check the model's name and tag)"),
                            r.status, std::nullopt);
        }
        throw HttpError(concat(canonical, ": ", url_for_messages(r.url), " answered HTTP ",
                               r.status, " for ", what),
                        r.status, r.retry_after());
    };
    HttpResponse manifest;
    try {
        with_retries(settings.transfer, events.cancel, retry_notice(events), [&] {
            manifest = client.get_small(manifest_request, 1 << 20, events.cancel);
            if (manifest.status < 200 || manifest.status >= 300)
                throw_for_status(manifest, "the model");
        });
    } catch (const NetworkError& e) {
        return cached_when_unreachable(e, ollama_from_cache(ref, settings));
    }
    OllamaModelLayer layer;
    try {
        layer = parse_ollama_manifest(manifest.body);
    } catch (const FormatError& e) {
        throw FormatError(concat(canonical, ": ", e.what()));
    }
    // Already in ollama's own store: used in place.
    for (const auto& root : settings.ollama_stores) {
        const OllamaStore theirs(root);
        if (regular_file_of_size(theirs.blob_path(layer.sha256), layer.size)) {
            return finish(settings, canonical, {theirs.blob_path(layer.sha256)}, false,
                          "from ollama's store");
        }
    }
    DownloadTarget target;
    target.name = concat(canonical, " (sha256-", layer.sha256.substr(0, 12), ")");
    target.path = ours.blob_path(layer.sha256);
    target.lock = ours.lock_path(layer.sha256);
    target.size = layer.size;
    target.digest = {DigestKind::Sha256, layer.sha256};
    const auto result = download_file(
        client, settings.transfer,
        [&] {
            HttpRequest r;
            r.url = concat(base, "/blobs/sha256:", layer.sha256);
            return r;
        },
        [&](const HttpResponse& r) { throw_for_status(r, "the model's data"); }, target, events);
    write_cache_file(ours.manifest_path(host, ref), manifest.body);
    return finish(settings, canonical, {target.path}, result.fetched,
                  concat("sha256 ", layer.sha256.substr(0, 12)));
}

// ---- plain URLs ----

struct UrlRecord {
    std::string url, etag;
    uint64_t size = 0;
};

std::optional<UrlRecord> read_url_record(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    try {
        const auto j =
            nlohmann::json::parse(read_file(path, "a URL record", 1 << 16), nullptr, false);
        if (!j.is_object() || !j.contains("url") || !j["url"].is_string() || !j.contains("size") ||
            !j["size"].is_number_unsigned())
            return std::nullopt;
        UrlRecord r;
        r.url = j["url"].get<std::string>();
        r.size = j["size"].get<uint64_t>();
        if (j.contains("etag") && j["etag"].is_string()) r.etag = j["etag"].get<std::string>();
        return r;
    } catch (const Error&) {
        return std::nullopt;
    }
}

void write_url_record(const std::filesystem::path& path, const UrlRecord& r) {
    const nlohmann::json j = {{"url", r.url}, {"etag", r.etag}, {"size", r.size}};
    write_cache_file(path, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// An ETag goes back in If-None-Match / If-Range: visible ASCII only, bounded.
bool usable_etag(std::string_view etag) {
    if (etag.empty() || etag.size() > 512) return false;
    for (char c : etag) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u >= 0x7f) return false;
    }
    return true;
}

struct NotModified {};

std::filesystem::path url_dir(const UrlReference& ref, const HubSettings& settings) {
    const std::string id = sha256_hex(std::as_bytes(std::span(ref.url))).substr(0, 32);
    return settings.minfer_cache / "url" / id;
}

std::optional<ResolvedModel> url_from_cache(const UrlReference& ref, const HubSettings& settings) {
    const auto dir = url_dir(ref, settings);
    const auto record = read_url_record(dir / "record.json");
    const auto file = dir / ref.file_name;
    if (!record || record->url != ref.url || !regular_file_of_size(file, record->size))
        return std::nullopt;
    ResolvedModel r;
    r.reference = ref.url;
    r.path = file;
    r.files = {file};
    return r;
}

ResolvedModel resolve_url(const UrlReference& ref, const HubSettings& settings, ResolveMode mode,
                          const DownloadEvents& events) {
    const auto dir = url_dir(ref, settings);
    const auto file = dir / ref.file_name;
    const auto record_file = dir / "record.json";
    const auto record = read_url_record(record_file);
    const bool cached = url_from_cache(ref, settings).has_value();
    if ((mode == ResolveMode::CacheFirst || settings.offline) && cached)
        return finish(settings, ref.url, {file}, false, "");
    if (settings.offline) {
        throw IoError(concat(ref.url, ": not in the cache (", dir.string(),
                             ") and HF_HUB_OFFLINE is set, so nothing is downloaded"));
    }
    // A partial file resumes only if the server still has the same bytes (If-Range).
    const auto partial_record = read_url_record(dir / "partial.json");
    HttpClient client(settings.transfer);
    DownloadTarget target;
    target.name = ref.file_name;
    target.path = file;
    target.lock = dir / ".lock";
    target.replace_existing = cached;
    DownloadEvents with_etag = events;
    std::string etag;
    with_etag.on_response = [&](const HttpResponse& head) {
        etag = head.header("etag");
        if (!usable_etag(etag)) etag.clear();
        UrlRecord partial{ref.url, etag, 0};
        write_url_record(dir / "partial.json", partial);
    };
    try {
        download_file(
            client, settings.transfer,
            [&] {
                HttpRequest r;
                r.url = ref.url;
                if (cached && usable_etag(record->etag))
                    r.headers.push_back("If-None-Match: " + record->etag);
                else if (partial_record && partial_record->url == ref.url &&
                         usable_etag(partial_record->etag))
                    r.headers.push_back("If-Range: " + partial_record->etag);
                return r;
            },
            [&](const HttpResponse& r) {
                if (r.status == 304 && cached) throw NotModified{};
                throw HttpError(concat(ref.url, ": HTTP ", r.status), r.status, r.retry_after());
            },
            target, with_etag);
    } catch (const NotModified&) {
        return finish(settings, ref.url, {file}, false, "unchanged (ETag)");
    } catch (const NetworkError& e) {
        return cached_when_unreachable(
            e, cached ? std::optional(finish(settings, ref.url, {file}, false, "")) : std::nullopt);
    }
    std::error_code ec;
    write_url_record(record_file, UrlRecord{ref.url, etag, std::filesystem::file_size(file, ec)});
    std::filesystem::remove(dir / "partial.json", ec);
    return finish(settings, ref.url, {file}, true, "");
}

}  // namespace

std::optional<ResolvedModel> find_in_cache(const ModelReference& reference,
                                           const HubSettings& settings) {
    if (const auto* h = std::get_if<HfReference>(&reference)) {
        const std::string canonical = to_string(reference);
        const HfRepoCache cache(settings.hf_cache, h->repo);
        std::optional<HfCacheHit> hit;
        try {
            hit = hf_from_cache(*h, canonical, cache, settings);
        } catch (const Error&) {
            return std::nullopt;
        }
        if (!hit) return std::nullopt;
        ResolvedModel r;
        r.reference = canonical;
        r.files = std::move(hit->files);
        r.path = r.files.front();
        return r;
    }
    if (const auto* o = std::get_if<OllamaReference>(&reference))
        return ollama_from_cache(*o, settings);
    if (const auto* u = std::get_if<UrlReference>(&reference)) return url_from_cache(*u, settings);
    return std::nullopt;
}

ResolvedModel resolve_model(const ModelReference& reference, const HubSettings& settings,
                            ResolveMode mode, const DownloadEvents& events) {
    if (const auto* p = std::get_if<PathReference>(&reference)) {
        ResolvedModel r;
        r.path = resolve_model_path(p->path);
        r.files = {r.path};
        return r;
    }
    if (const auto* h = std::get_if<HfReference>(&reference))
        return resolve_hf(*h, settings, mode, events);
    if (const auto* o = std::get_if<OllamaReference>(&reference))
        return resolve_ollama(*o, settings, mode, events);
    return resolve_url(std::get<UrlReference>(reference), settings, mode, events);
}

ResolvedModel resolve_model(const ModelReference& reference, ResolveMode mode,
                            const DownloadEvents& events) {
    const HubSettings settings =
        is_remote(reference) ? HubSettings::from_environment() : HubSettings{};
    return resolve_model(reference, settings, mode, events);
}

}  // namespace minfer::hub
