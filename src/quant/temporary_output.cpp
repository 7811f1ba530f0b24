#include "quant/temporary_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <system_error>

#include "core/error.h"

namespace minfer {
namespace {

std::string random_suffix() {
    static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
    std::random_device device;
    std::uniform_int_distribution<int> pick(0, sizeof(kAlphabet) - 2);
    std::string s(6, 'x');
    for (char& c : s) c = kAlphabet[pick(device)];
    return s;
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

}  // namespace

TemporaryOutputFile::TemporaryOutputFile(std::filesystem::path destination)
    : destination_(std::move(destination)) {
    constexpr int kAttempts = 64;
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
        std::filesystem::path candidate = destination_;
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
        throw IoError(concat(destination_.string(), ": no free temporary name after ", kAttempts,
                             " attempts"));
    }
    stream_.open(temporary_, std::ios::binary | std::ios::trunc);
    if (!stream_) {
        std::error_code ignored;
        std::filesystem::remove(temporary_, ignored);
        throw IoError(concat(temporary_.string(), ": cannot open for writing"));
    }
}

TemporaryOutputFile::~TemporaryOutputFile() {
    if (committed_) return;
    stream_.close();
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
}

void TemporaryOutputFile::commit() {
    stream_.flush();
    stream_.close();
    if (!stream_) throw IoError(concat(temporary_.string(), ": write failed (disk full?)"));
    sync_file(temporary_);
    std::error_code ec;
    std::filesystem::rename(temporary_, destination_, ec);
    if (ec) {
        throw IoError(concat("cannot rename ", temporary_.string(), " to ", destination_.string(),
                             ": ", ec.message()));
    }
    committed_ = true;
}

}  // namespace minfer
