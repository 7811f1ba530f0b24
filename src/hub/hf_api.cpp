#include "hub/hf_api.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "hub/reference.h"
#include "hub/url.h"

namespace minfer::hub {
namespace {

using Json = nlohmann::json;

constexpr std::size_t kMaxJsonBytes = std::size_t{32} << 20;
constexpr std::size_t kMaxEntries = 100000;
constexpr int kMaxPages = 1000;
constexpr int kMaxDepth = 16;
constexpr uint64_t kMaxSize = uint64_t{1} << 53;

Json parse_json(std::string_view text, std::string_view what) {
    try {
        return Json::parse(text, [](int depth, Json::parse_event_t, Json&) {
            if (depth > kMaxDepth) throw FormatError("nested too deeply");
            return true;
        });
    } catch (const Json::exception& e) {
        throw FormatError(concat(what, " is not valid JSON (", e.what(), ")"));
    } catch (const FormatError& e) {
        throw FormatError(concat(what, " is not usable JSON (", e.what(), ")"));
    }
}

uint64_t size_field(const Json& j, const char* key, std::string_view what) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned() || it->get<uint64_t>() > kMaxSize)
        throw FormatError(concat(what, ": '", key, "' is not a file size"));
    return it->get<uint64_t>();
}

std::string string_field(const Json& j, const char* key, std::string_view what) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_string())
        throw FormatError(concat(what, ": '", key, "' is missing or not a string"));
    return it->get<std::string>();
}

bool is_git_oid(std::string_view s) {
    return is_commit_id(s);  // the same shape: 40 lowercase hex digits
}

// Text from a header, cut short, for a message (the CLI escapes control characters).
std::string short_text(std::string_view s) {
    return std::string(s.substr(0, 200));
}

}  // namespace

std::string parse_revision_commit(std::string_view json) {
    const Json j = parse_json(json, "the hub's revision information");
    if (!j.is_object()) throw FormatError("the hub's revision information is not a JSON object");
    const std::string sha = string_field(j, "sha", "the hub's revision information");
    if (!is_commit_id(sha)) {
        throw FormatError(concat("the hub's revision information names the commit '",
                                 short_text(sha), "', which is not a 40-digit commit id"));
    }
    return sha;
}

std::vector<RepoFile> parse_tree_page(std::string_view json) {
    constexpr std::string_view what = "the hub's file list";
    const Json j = parse_json(json, what);
    if (!j.is_array()) throw FormatError("the hub's file list is not a JSON array");
    if (j.size() > kMaxEntries) throw FormatError("the hub's file list has too many entries");
    std::vector<RepoFile> files;
    for (const Json& e : j) {
        if (!e.is_object()) throw FormatError("the hub's file list holds a non-object entry");
        const std::string type = string_field(e, "type", what);
        if (type != "file") continue;  // directories (the listing is recursive)
        RepoFile f;
        f.path = string_field(e, "path", what);
        if (!is_safe_relative_path(f.path)) {
            throw FormatError(concat("the hub's file list names the unsafe path '",
                                     short_text(f.path), "' (refused)"));
        }
        const std::string entry = concat(what, ", '", f.path, "'");
        f.size = size_field(e, "size", entry);
        const std::string oid = string_field(e, "oid", entry);
        if (!is_git_oid(oid)) throw FormatError(concat(entry, ": 'oid' is not a git blob id"));
        f.git_oid = oid;
        const auto lfs = e.find("lfs");
        if (lfs != e.end() && !lfs->is_null()) {
            if (!lfs->is_object()) throw FormatError(concat(entry, ": 'lfs' is not an object"));
            const std::string sha = string_field(*lfs, "oid", entry);
            if (!is_sha256_hex(sha))
                throw FormatError(concat(entry, ": the LFS oid is not a sha256"));
            const uint64_t lfs_size = size_field(*lfs, "size", entry);
            if (lfs_size != f.size) {
                throw FormatError(
                    concat(entry, ": sizes disagree (", f.size, " and LFS ", lfs_size, ")"));
            }
            f.blob_id = sha;
            f.digest = {DigestKind::Sha256, sha};
        } else {
            f.blob_id = oid;
            f.digest = {DigestKind::GitSha1, oid};
        }
        files.push_back(std::move(f));
    }
    return files;
}

std::optional<std::string> next_page_link(std::string_view header) {
    // <URL>; rel="next", <URL2>; rel="prev"
    std::size_t pos = 0;
    while (pos < header.size()) {
        const std::size_t open = header.find('<', pos);
        if (open == std::string_view::npos) return std::nullopt;
        const std::size_t close = header.find('>', open);
        if (close == std::string_view::npos) return std::nullopt;
        const std::size_t next = header.find('<', close);
        const std::string_view params = header.substr(
            close + 1, next == std::string_view::npos ? std::string_view::npos : next - close - 1);
        if (params.find("rel=\"next\"") != std::string_view::npos ||
            params.find("rel=next") != std::string_view::npos)
            return std::string(header.substr(open + 1, close - open - 1));
        pos = close + 1;
    }
    return std::nullopt;
}

HfApi::HfApi(HttpClient& client, const HubSettings& settings, const std::atomic<bool>* cancel,
             std::function<void(const std::string&, double)> on_retry)
    : client_(client), settings_(settings), cancel_(cancel), on_retry_(std::move(on_retry)) {
    const auto endpoint = parse_http_url(settings.hf_endpoint);
    token_origin_ = endpoint ? endpoint->origin() : "";
}

HttpRequest HfApi::api_request(const std::string& url) const {
    HttpRequest r;
    r.url = url;
    r.headers.emplace_back("Accept: application/json");
    r.bearer_token = settings_.hf_token;
    r.token_origin = token_origin_;
    r.compressed = true;
    return r;
}

HttpRequest HfApi::file_request(const std::string& repo, const std::string& commit,
                                const std::string& path) const {
    HttpRequest r;
    r.url = concat(settings_.hf_endpoint, "/", repo, "/resolve/", commit, "/",
                   percent_encode(path, true));
    r.bearer_token = settings_.hf_token;
    r.token_origin = token_origin_;
    return r;
}

void HfApi::throw_for_status(const HttpResponse& r, std::string_view repo,
                             std::string_view reference, std::string_view what) const {
    if (r.status >= 200 && r.status < 300) return;
    const std::string code = r.header("x-error-code");
    const std::string said = r.header("x-error-message");
    const std::string hub_says =
        said.empty() ? "" : concat(" (the hub says: ", short_text(said), ")");
    const bool with_token = settings_.hf_token.has_value();
    std::string message;
    if (code == "GatedRepo") {
        message = concat(reference, ": the repository is gated: accept its licence at ",
                         settings_.hf_endpoint, "/", repo,
                         with_token ? " with the account HF_TOKEN belongs to"
                                    : ", then set HF_TOKEN (or run huggingface-cli login)");
    } else if (code == "RepoNotFound") {
        message =
            concat(reference, ": no such repository on ", settings_.hf_endpoint,
                   with_token ? " (or HF_TOKEN cannot see it)" : " (a private one needs HF_TOKEN)");
    } else if (code == "RevisionNotFound") {
        message = concat(reference, ": no such revision in the repository");
    } else if (code == "EntryNotFound") {
        message = concat(reference, ": ", what, " is not in the repository");
    } else if (r.status == 401 || r.status == 403) {
        message =
            concat(reference, ": ", settings_.hf_endpoint, " refused access (HTTP ", r.status,
                   ") to ", what, with_token ? ": HF_TOKEN was not accepted" : ": set HF_TOKEN");
    } else if (r.status == 404) {
        message = concat(reference, ": ", what, " not found (HTTP 404)");
    } else {
        message = concat(reference, ": ", url_for_messages(r.url), " answered HTTP ", r.status,
                         " for ", what);
    }
    throw HttpError(message + hub_says, r.status, r.retry_after());
}

HttpResponse HfApi::get_json(const std::string& url, std::string_view repo,
                             std::string_view reference, std::string_view what) {
    HttpResponse response;
    with_retries(settings_.transfer, cancel_, on_retry_, [&] {
        response = client_.get_small(api_request(url), kMaxJsonBytes, cancel_);
        throw_for_status(response, repo, reference, what);
    });
    return response;
}

std::string HfApi::commit_of(const std::string& repo, const std::string& revision,
                             std::string_view reference) {
    const std::string url = concat(settings_.hf_endpoint, "/api/models/", repo, "/revision/",
                                   percent_encode(revision, false));
    const HttpResponse r = get_json(url, repo, reference, concat("revision '", revision, "'"));
    try {
        return parse_revision_commit(r.body);
    } catch (const FormatError& e) {
        throw FormatError(concat(reference, ": ", e.what()));
    }
}

std::vector<RepoFile> HfApi::list_files(const std::string& repo, const std::string& commit,
                                        std::string_view reference) {
    std::string url =
        concat(settings_.hf_endpoint, "/api/models/", repo, "/tree/", commit, "?recursive=true");
    std::vector<RepoFile> files;
    for (int page = 0;; ++page) {
        if (page == kMaxPages)
            throw FormatError(concat(reference, ": the file list has too many pages"));
        const HttpResponse r = get_json(url, repo, reference, "the file list");
        try {
            auto more = parse_tree_page(r.body);
            if (files.size() + more.size() > kMaxEntries)
                throw FormatError("the hub's file list has too many entries");
            for (auto& f : more) files.push_back(std::move(f));
        } catch (const FormatError& e) {
            throw FormatError(concat(reference, ": ", e.what()));
        }
        const auto next = next_page_link(r.header("link"));
        if (!next) break;
        const auto next_url = parse_http_url(*next);
        if (!next_url || next_url->origin() != token_origin_) {
            throw FormatError(concat(reference, ": the hub's next page of the file list is not on ",
                                     settings_.hf_endpoint, " (refused)"));
        }
        url = *next;
    }
    return files;
}

}  // namespace minfer::hub
