#pragma once
// An exclusive advisory lock on a file (flock), the kind huggingface_hub takes through the
// filelock package: a lock on .locks/models--OWNER--REPO/BLOB.lock keeps its tools and other
// minfer processes away from a blob being downloaded. The kernel drops the lock when the process
// dies, so a killed download never leaves a stale lock. The lock file stays, as theirs do.

#include <atomic>
#include <filesystem>
#include <functional>

namespace minfer::hub {

class FileLock {
  public:
    // Creates `path` (and its directory) if needed and locks it. When another process holds it,
    // calls on_wait once and waits, checking `cancel` every 100 ms (Cancelled when it is set).
    // Throws IoError naming the path when it cannot be created or locked.
    FileLock(const std::filesystem::path& path, const std::function<void()>& on_wait,
             const std::atomic<bool>* cancel);
    ~FileLock();
    FileLock(const FileLock&) = delete;
    FileLock& operator=(const FileLock&) = delete;

  private:
    void wait_for_lock(const std::filesystem::path& path, const std::function<void()>& on_wait,
                       const std::atomic<bool>* cancel);
    int fd_ = -1;
};

}  // namespace minfer::hub
