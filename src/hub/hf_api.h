#pragma once
// The Hugging Face hub's HTTP API, the parts a download needs:
//   GET {endpoint}/api/models/{repo}/revision/{rev}          -> {"sha": COMMIT, ...}
//   GET {endpoint}/api/models/{repo}/tree/{commit}?recursive=true
//       -> [{"type": "file", "path", "size", "oid", "lfs": {"oid": SHA256, "size"}}, ...],
//          more pages named by a Link: <...>; rel="next" header
//   GET {endpoint}/{repo}/resolve/{commit}/{path}            -> the bytes, usually after a
//                                                               redirect to another host
// Errors are told apart by the X-Error-Code header (the hub answers 401 for an unknown repository
// when no token is sent): RepoNotFound, GatedRepo, RevisionNotFound, EntryNotFound.
// The revision is asked first and the tree and files are then fetched at that commit, so that a
// push in between cannot mix two versions.

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hub/digest.h"
#include "hub/http_client.h"
#include "hub/hub_settings.h"

namespace minfer::hub {

struct RepoFile {
    std::string path;  // inside the repository, checked by is_safe_relative_path
    uint64_t size = 0;
    std::string blob_id;  // the cache's blob name: the LFS sha256, else the git blob id
    std::string git_oid;  // the git blob id (of the LFS pointer, for an LFS file)
    ExpectedDigest digest;
};

// Parsers of the hub's answers; FormatError for anything unexpected (a bad commit id, an unsafe
// path, a size beyond 2^53, an LFS oid that is not a sha256, more than 100,000 entries).
std::string parse_revision_commit(std::string_view json);
std::vector<RepoFile> parse_tree_page(std::string_view json);
// The URL of a Link header's rel="next", or nullopt.
std::optional<std::string> next_page_link(std::string_view link_header);

class HfApi {
  public:
    // on_retry hears about each retried request (what failed, the wait in seconds).
    HfApi(HttpClient& client, const HubSettings& settings, const std::atomic<bool>* cancel,
          std::function<void(const std::string&, double)> on_retry);

    // The commit a revision names. `reference` is for messages.
    std::string commit_of(const std::string& repo, const std::string& revision,
                          std::string_view reference);
    std::vector<RepoFile> list_files(const std::string& repo, const std::string& commit,
                                     std::string_view reference);
    // The request for a file's bytes at a commit (the token goes to the endpoint only).
    HttpRequest file_request(const std::string& repo, const std::string& commit,
                             const std::string& path) const;
    // Throws the error an HF answer means (see above), naming the reference and what to do.
    void throw_for_status(const HttpResponse& response, std::string_view repo,
                          std::string_view reference, std::string_view what) const;

  private:
    HttpRequest api_request(const std::string& url) const;
    HttpResponse get_json(const std::string& url, std::string_view repo, std::string_view reference,
                          std::string_view what);

    HttpClient& client_;
    const HubSettings& settings_;
    std::string token_origin_;
    const std::atomic<bool>* cancel_;
    std::function<void(const std::string&, double)> on_retry_;
};

}  // namespace minfer::hub
