#include "core/atomic_output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <string>
#include <system_error>

#include "core/error.h"

namespace minfer {
namespace {

// Linux's own limit on links followed in one path lookup (MAXSYMLINKS).
constexpr int kMaxSymlinks = 40;
constexpr mode_t kPermissionBits = 0777;

std::string random_suffix() {
    static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device device;
    std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
    std::string s(6, 'x');
    for (char& c : s) c = kAlphabet[pick(device)];
    return s;
}

// "OUT" or, when links were followed, "OUT -> TARGET": the user typed the first, the error is
// about the second.
std::string describe(const std::filesystem::path& destination, const std::filesystem::path& file) {
    if (destination == file) return destination.string();
    return concat(destination.string(), " -> ", file.string());
}

const char* kind_of(mode_t mode) {
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// A missing file is created; its directory must already be there.
void require_directory_of(const std::filesystem::path& destination,
                          const std::filesystem::path& file) {
    const std::filesystem::path directory = file.has_parent_path() ? file.parent_path() : ".";
    struct stat st {};
    if (::stat(directory.c_str(), &st) != 0) {
        throw IoError(concat(describe(destination, file), ": cannot write into ",
                             directory.string(), ": ", std::strerror(errno)));
    }
    if (!S_ISDIR(st.st_mode)) {
        throw IoError(
            concat(describe(destination, file), ": ", directory.string(), " is not a directory"));
    }
}

// fsync(2) on a path: makes the renamed file's contents durable before the rename.
void sync_file(const std::filesystem::path& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        throw IoError(concat(path.string(), ": cannot reopen to sync: ", std::strerror(errno)));
    const int rc = ::fsync(fd);
    const int saved = errno;
    ::close(fd);
    if (rc != 0) throw IoError(concat(path.string(), ": sync failed: ", std::strerror(saved)));
}

// Makes the rename itself durable. Best effort: the file is already in place, and a failure here
// is not one the caller could act on.
void sync_directory_of(const std::filesystem::path& file) {
    const std::filesystem::path directory = file.has_parent_path() ? file.parent_path() : ".";
    const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    static_cast<void>(::fsync(fd));
    ::close(fd);
}

}  // namespace

OutputTarget resolve_output_target(const std::filesystem::path& destination) {
    if (destination.empty()) throw UsageError("the output path is empty");
    std::filesystem::path file = destination;
    for (int links = 0;; ++links) {
        struct stat st {};
        if (::lstat(file.c_str(), &st) != 0) {
            const int error = errno;
            if (error != ENOENT) {
                throw IoError(concat(describe(destination, file),
                                     ": cannot examine: ", std::strerror(error)));
            }
            require_directory_of(destination, file);
            return {destination, file, std::nullopt};
        }
        if (S_ISLNK(st.st_mode)) {
            if (links == kMaxSymlinks) {
                throw IoError(concat(destination.string(), ": more than ", kMaxSymlinks,
                                     " symbolic links to follow (a loop?)"));
            }
            std::error_code ec;
            const std::filesystem::path link = std::filesystem::read_symlink(file, ec);
            if (ec) {
                throw IoError(concat(describe(destination, file),
                                     ": cannot read the symbolic link: ", ec.message()));
            }
            file = link.is_absolute() ? link : file.parent_path() / link;
            continue;
        }
        if (S_ISREG(st.st_mode)) {
            return {destination, file,
                    OutputTarget::Existing{static_cast<mode_t>(st.st_mode & kPermissionBits),
                                           st.st_uid, st.st_gid}};
        }
        if (S_ISDIR(st.st_mode))
            throw UsageError(
                concat(describe(destination, file), ": is a directory; give a file path"));
        throw UsageError(concat(describe(destination, file), ": is ", kind_of(st.st_mode),
                                "; minfer writes only to regular files"));
    }
}

AtomicOutputFile::AtomicOutputFile(const std::filesystem::path& destination)
    : target_(resolve_output_target(destination)) {
    constexpr int kAttempts = 64;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        std::filesystem::path candidate = target_.file;
        candidate += ".tmp-" + random_suffix();
        const int fd = ::open(candidate.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            ::close(fd);
            temporary_ = std::move(candidate);
            break;
        }
        if (errno != EEXIST) {
            throw IoError(concat(candidate.string(),
                                 ": cannot create the temporary output: ", std::strerror(errno)));
        }
    }
    if (temporary_.empty()) {
        throw IoError(concat(target_.file.string(), ": no free temporary name after ", kAttempts,
                             " attempts"));
    }
    stream_.open(temporary_, std::ios::binary | std::ios::trunc);
    if (!stream_) {
        std::error_code ignored;
        std::filesystem::remove(temporary_, ignored);
        throw IoError(concat(temporary_.string(), ": cannot open for writing"));
    }
}

AtomicOutputFile::~AtomicOutputFile() {
    if (committed_) return;
    stream_.close();
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
}

void AtomicOutputFile::commit() {
    stream_.flush();
    stream_.close();
    if (!stream_) throw IoError(concat(temporary_.string(), ": write failed (disk full?)"));

    // The write may have taken minutes: look at the destination again.
    const OutputTarget now = resolve_output_target(target_.destination);
    if (now.file != target_.file) {
        throw IoError(concat(target_.destination.string(), ": now leads to ", now.file.string(),
                             " instead of ", target_.file.string(),
                             " (changed while writing); not replaced"));
    }
    if (now.existing) {
        // Owner first (chown may clear mode bits). Only root may give a file away, and only a
        // member may give it the group.
        if (::chown(temporary_.c_str(), now.existing->owner, now.existing->group) != 0 &&
            ::chown(temporary_.c_str(), static_cast<uid_t>(-1), now.existing->group) != 0) {
            // The replacement stays the writer's, as it would after any rewrite by them.
        }
        if (::chmod(temporary_.c_str(), now.existing->permissions) != 0) {
            throw IoError(concat(temporary_.string(), ": cannot set mode ", std::oct,
                                 now.existing->permissions, ": ", std::strerror(errno)));
        }
    }
    sync_file(temporary_);
    std::error_code ec;
    std::filesystem::rename(temporary_, target_.file, ec);
    if (ec) {
        throw IoError(concat("cannot rename ", temporary_.string(), " to ", target_.file.string(),
                             ": ", ec.message()));
    }
    committed_ = true;
    sync_directory_of(target_.file);
}

}  // namespace minfer
