#include "hub/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "core/error.h"

namespace minfer::hub {

FileLock::FileLock(const std::filesystem::path& path, const std::function<void()>& on_wait,
                   const std::atomic<bool>* cancel) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
        throw IoError(
            concat(path.parent_path().string(), ": cannot create the directory: ", ec.message()));
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd_ < 0)
        throw IoError(concat(path.string(), ": cannot open the lock file: ", std::strerror(errno)));
    try {
        wait_for_lock(path, on_wait, cancel);
    } catch (...) {
        ::close(fd_);
        throw;
    }
}

void FileLock::wait_for_lock(const std::filesystem::path& path,
                             const std::function<void()>& on_wait,
                             const std::atomic<bool>* cancel) {
    bool told = false;
    for (;;) {
        if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
        const int err = errno;
        if (err != EWOULDBLOCK && err != EINTR)
            throw IoError(concat(path.string(), ": cannot lock: ", std::strerror(err)));
        if (!told && on_wait) {
            told = true;
            on_wait();
        }
        if (cancel != nullptr && cancel->load())
            throw Cancelled("interrupted while waiting for another download");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

FileLock::~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
}

}  // namespace minfer::hub
