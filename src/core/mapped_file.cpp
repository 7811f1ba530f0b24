#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/error.h"

namespace minfer {

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    // O_NONBLOCK: opening a FIFO would otherwise wait for a writer forever before fstat could
    // refuse it (`minfer info FIFO` hung). It changes nothing for the regular files mapped.
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw IoError(concat(path.string(), ": cannot open: ", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        throw IoError(concat(path.string(), ": cannot stat: ", std::strerror(err)));
    }
    if (S_ISDIR(st.st_mode)) {
        ::close(fd);
        throw IoError(concat(path.string(), ": is a directory"));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        throw IoError(concat(path.string(), ": not a regular file"));
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
        void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            ::close(fd);
            throw IoError(
                concat(path.string(), ": cannot map ", size_, " bytes: ", std::strerror(err)));
        }
        data_ = static_cast<const std::byte*>(p);
    }
    // The mapping keeps the file alive; the descriptor is no longer needed.
    ::close(fd);
}

MappedFile::~MappedFile() {
    release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void MappedFile::release() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
}

}  // namespace minfer

namespace minfer {

void read_ahead(std::span<const std::byte> bytes) {
    if (bytes.empty()) return;
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = reinterpret_cast<uintptr_t>(bytes.data()) / page * page;
    const uintptr_t end = reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size();
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

}  // namespace minfer
