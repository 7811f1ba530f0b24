#include "hub/hf_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

#include "core/error.h"
#include "core/file_io.h"
#include "core/log.h"
#include "hub/cache_file.h"
#include "hub/reference.h"

namespace minfer::hub {
namespace {

std::string read_small(const std::filesystem::path& path) {
    return read_file(path, "a cache record", 1 << 20);
}

}  // namespace

std::string repo_folder_name(std::string_view repo) {
    std::string name = "models--";
    for (char c : repo) name += c == '/' ? std::string("--") : std::string(1, c);
    return name;
}

HfRepoCache::HfRepoCache(const std::filesystem::path& root, std::string_view repo)
    : root_(root), folder_name_(repo_folder_name(repo)) {
    folder_ = root_ / folder_name_;
}

std::filesystem::path HfRepoCache::blob_path(std::string_view blob_id) const {
    return folder_ / "blobs" / std::string(blob_id);
}

std::filesystem::path HfRepoCache::lock_path(std::string_view blob_id) const {
    return root_ / ".locks" / folder_name_ / concat(blob_id, ".lock");
}

std::filesystem::path HfRepoCache::snapshot_dir(std::string_view commit) const {
    return folder_ / "snapshots" / std::string(commit);
}

std::filesystem::path HfRepoCache::snapshot_path(std::string_view commit,
                                                 std::string_view file) const {
    return snapshot_dir(commit) / std::string(file);
}

std::optional<std::string> HfRepoCache::commit_for(std::string_view revision) const {
    if (is_commit_id(revision)) return std::string(revision);
    const auto ref = folder_ / "refs" / std::string(revision);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(ref, ec)) return std::nullopt;
    try {
        std::string text = read_small(ref);
        while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
            text.pop_back();
        if (is_commit_id(text)) return text;
    } catch (const Error&) {
    }
    return std::nullopt;
}

void HfRepoCache::write_ref(std::string_view revision, std::string_view commit) const {
    if (is_commit_id(revision)) return;
    write_cache_file(folder_ / "refs" / std::string(revision), commit);
}

void HfRepoCache::link(std::string_view commit, std::string_view file,
                       std::string_view blob_id) const {
    const std::filesystem::path pointer = snapshot_path(commit, file);
    std::error_code ec;
    std::filesystem::create_directories(pointer.parent_path(), ec);
    if (ec) {
        throw IoError(concat(pointer.parent_path().string(),
                             ": cannot create the directory: ", ec.message()));
    }
    std::string target;
    const auto depth = static_cast<std::size_t>(std::count(file.begin(), file.end(), '/'));
    for (std::size_t i = 0; i < depth + 2; ++i) target += "../";
    target += concat("blobs/", blob_id);
    std::random_device rd;
    const std::filesystem::path temp =
        pointer.parent_path() / concat(".minfer-link-", ::getpid(), "-", rd());
    if (::symlink(target.c_str(), temp.c_str()) != 0) {
        throw IoError(
            concat(temp.string(), ": cannot create a symbolic link: ", std::strerror(errno)));
    }
    if (::rename(temp.c_str(), pointer.c_str()) != 0) {
        const int err = errno;
        ::unlink(temp.c_str());
        throw IoError(concat("cannot place ", pointer.string(), ": ", std::strerror(err)));
    }
}

std::vector<RepoFile> HfRepoCache::snapshot_files(std::string_view commit) const {
    std::vector<RepoFile> files;
    const auto dir = snapshot_dir(commit);
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return files;
    auto it = std::filesystem::recursive_directory_iterator(dir, ec);
    for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
        if (it.depth() > 16 || files.size() >= 100000) break;
        const auto& entry = *it;
        std::error_code e2;
        const bool is_link = entry.is_symlink(e2);
        if (!is_link && !entry.is_regular_file(e2)) continue;
        const std::string rel = entry.path().lexically_relative(dir).generic_string();
        if (!is_safe_relative_path(rel)) continue;
        struct stat st {};
        if (::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
        RepoFile f;
        f.path = rel;
        f.size = static_cast<uint64_t>(st.st_size);
        if (is_link)
            f.blob_id = std::filesystem::read_symlink(entry.path(), e2).filename().string();
        files.push_back(std::move(f));
    }
    return files;
}

bool HfRepoCache::has_file(std::string_view commit, std::string_view file, uint64_t size) const {
    struct stat st {};
    const auto p = snapshot_path(commit, file);
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           static_cast<uint64_t>(st.st_size) == size;
}

std::optional<std::vector<RepoFile>> load_listing(const std::filesystem::path& minfer_cache,
                                                  std::string_view repo, std::string_view commit) {
    const auto path = minfer_cache / "hf" / repo_folder_name(repo) / concat(commit, ".json");
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
    try {
        return parse_tree_page(read_file(path, "a saved file list", std::size_t{64} << 20));
    } catch (const Error& e) {
        log_warning(concat(path.string(), ": ignored (", e.what(), ")"));
        return std::nullopt;
    }
}

void save_listing(const std::filesystem::path& minfer_cache, std::string_view repo,
                  std::string_view commit, const std::vector<RepoFile>& files) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& f : files) {
        // The hub's own shape, read back by parse_tree_page.
        nlohmann::json e = {
            {"type", "file"}, {"path", f.path}, {"size", f.size}, {"oid", f.git_oid}};
        if (f.digest.kind == DigestKind::Sha256)
            e["lfs"] = {{"oid", f.digest.hex}, {"size", f.size}};
        list.push_back(std::move(e));
    }
    const auto path = minfer_cache / "hf" / repo_folder_name(repo) / concat(commit, ".json");
    try {
        write_cache_file(path, list.dump());
    } catch (const Error& e) {
        log_warning(concat("could not save the file list of ", repo, ": ", e.what()));
    }
}

}  // namespace minfer::hub
