#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace minfer {
namespace {

class FileDescriptor {
  public:
    explicit FileDescriptor(int fd) : fd_(fd) {}
    ~FileDescriptor() {
        if (fd_ >= 0) ::close(fd_);
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    int get() const { return fd_; }

  private:
    int fd_;
};

}  // namespace

std::string read_file(const std::filesystem::path& path, std::string_view what,
                      std::size_t max_bytes) {
    const auto fail = [&](std::string_view problem) {
        return IoError(concat("cannot read ", what, " '", path.string(), "': ", problem));
    };
    const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) throw fail(std::strerror(errno));
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) throw fail(std::strerror(errno));
    if (S_ISDIR(info.st_mode)) throw fail("it is a directory, expected a file");
    if (S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) > max_bytes) {
        throw fail(concat("it holds ", info.st_size, " bytes, more than the ", max_bytes,
                          " this reads"));
    }
    std::string text;
    char chunk[65536];
    for (;;) {
        const ssize_t n = ::read(fd.get(), chunk, sizeof(chunk));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw fail(std::strerror(errno));
        }
        if (n == 0) break;
        if (text.size() + static_cast<std::size_t>(n) > max_bytes)
            throw fail(concat("it holds more than the ", max_bytes, " bytes this reads"));
        text.append(chunk, static_cast<std::size_t>(n));
    }
    return text;
}

}  // namespace minfer
