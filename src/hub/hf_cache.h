#pragma once
// The Hugging Face hub cache, laid out as huggingface_hub lays it out, so that files fetched by
// huggingface-cli are reused here and ours by it:
//
//   ROOT/models--OWNER--REPO/blobs/BLOB               the bytes; BLOB is the LFS sha256 (or the
//                                                     git blob id of a small file)
//   ROOT/models--OWNER--REPO/blobs/BLOB.incomplete    a download in progress (resumable)
//   ROOT/models--OWNER--REPO/snapshots/COMMIT/PATH    a relative symlink to ../../blobs/BLOB
//                                                     (one more ../ per directory in PATH)
//   ROOT/models--OWNER--REPO/refs/REVISION            the commit a branch or tag pointed at,
//                                                     without a newline (refs/pr/1 nests)
//   ROOT/.locks/models--OWNER--REPO/BLOB.lock         the download lock
//
// minfer keeps one more thing, in its own cache: the repository's file list at each commit it
// fetched (MINFER_CACHE/hf/models--OWNER--REPO/COMMIT.json), so that a reference without a file
// name picks the same file offline as online.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hub/hf_api.h"

namespace minfer::hub {

// "models--OWNER--REPO"
std::string repo_folder_name(std::string_view repo);

class HfRepoCache {
  public:
    HfRepoCache(const std::filesystem::path& root, std::string_view repo);

    const std::filesystem::path& folder() const { return folder_; }
    std::filesystem::path blob_path(std::string_view blob_id) const;
    std::filesystem::path lock_path(std::string_view blob_id) const;
    std::filesystem::path snapshot_dir(std::string_view commit) const;
    std::filesystem::path snapshot_path(std::string_view commit, std::string_view file) const;

    // The commit a revision names: a commit id is itself; a branch or tag is read from refs/
    // (nullopt when missing or not a commit id).
    std::optional<std::string> commit_for(std::string_view revision) const;
    // Writes refs/REVISION atomically (nothing for a commit id).
    void write_ref(std::string_view revision, std::string_view commit) const;
    // Points snapshots/COMMIT/FILE at blobs/BLOB with a relative symlink, replaced atomically.
    void link(std::string_view commit, std::string_view file, std::string_view blob_id) const;
    // Files of a snapshot whose target exists (recursive; unsafe names skipped), with the size of
    // what they point at and the blob they name; no digests.
    std::vector<RepoFile> snapshot_files(std::string_view commit) const;
    // Whether snapshots/COMMIT/FILE leads to a regular file of that size.
    bool has_file(std::string_view commit, std::string_view file, uint64_t size) const;

  private:
    std::filesystem::path root_;
    std::filesystem::path folder_;
    std::string folder_name_;
};

// The file list minfer saved for (repo, commit), or nullopt (never saved, or unreadable).
std::optional<std::vector<RepoFile>> load_listing(const std::filesystem::path& minfer_cache,
                                                  std::string_view repo, std::string_view commit);
// Saves it atomically; a failure is only a warning (the listing can be fetched again).
void save_listing(const std::filesystem::path& minfer_cache, std::string_view repo,
                  std::string_view commit, const std::vector<RepoFile>& files);

}  // namespace minfer::hub
