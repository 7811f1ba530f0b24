#pragma once
// The file side of a download: takes the bytes as the network delivers them, writes them to the
// partial file and hashes them, with as little work as possible on the network thread.
//
// The network thread only copies each piece into a staging buffer of 1 MiB (4 of them, reused);
// a second thread hashes every full buffer from memory, writes it with one write() and starts its
// writeback to disk (sync_file_range), so that the final fsync waits only for the tail. Measured
// against the earlier design (the network thread writing each piece as it came, the second thread
// reading it back from the page cache to hash it): pieces of arbitrary length made ext4 zero the
// rest of each new page before the next piece filled it, and waking the hasher for every piece
// cost more CPU than the hash; see docs/hub.md for the figures.
//
// The bytes already in the file when a download resumes are hashed first, from the file.
// Errors of the second thread (a full disk: DiskFull) reach the network thread at its next call.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "hub/digest.h"

namespace minfer::hub {

// The disk (or the user's quota) is full; what() says which disk.
class DiskFull : public IoError {
  public:
    using IoError::IoError;
};

// An errno that means the disk or the user's quota is full (ENOSPC, EDQUOT).
bool is_disk_full(int err);

class BlobWriter {
  public:
    // `fd` is open for reading and writing, positioned at `existing`, the bytes already there.
    BlobWriter(int fd, std::filesystem::path path, DigestKind kind, uint64_t size_for_git,
               uint64_t existing);
    // Writes what is staged (errors ignored: the file keeps what reached it) and stops the thread.
    ~BlobWriter();
    BlobWriter(const BlobWriter&) = delete;
    BlobWriter& operator=(const BlobWriter&) = delete;

    // On the network thread. Throws the second thread's error, if it had one.
    void write(std::span<const std::byte> bytes);
    // The server ignored a range request: the file and the hash start over.
    void restart();
    // Bytes taken so far (those in the file and those staged): where the next request resumes.
    uint64_t written();
    // Waits until every byte taken is in the file and hashed; the digest of the whole file.
    std::string digest();
    // After an error or an interruption: writes what is staged if it can, and returns the bytes
    // the file holds (what the next run resumes from).
    uint64_t stop_and_keep();

  private:
    struct Buffer {
        std::vector<std::byte> bytes;
        std::size_t used = 0;
    };

    void run();
    void hash_existing(uint64_t existing);
    void write_to_file(std::span<const std::byte> bytes);
    void start_writeback();
    // With the lock held: the staging buffer in use, taking a free one (waiting) when needed.
    Buffer& current(std::unique_lock<std::mutex>& lock);
    void hand_over_current();  // lock held
    void wait_until_drained(std::unique_lock<std::mutex>& lock);

    static constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
    static constexpr int kBuffers = 4;
    static constexpr uint64_t kWritebackBytes = uint64_t{16} << 20;

    int fd_;
    std::filesystem::path path_;
    Hasher hasher_;  // the thread's, or anyone's while the queue is drained
    std::mutex mutex_;
    std::condition_variable work_, done_;
    std::vector<Buffer> buffers_;
    std::deque<int> full_;  // buffers waiting for the thread, in file order
    std::vector<int> free_;
    int current_ = -1;           // the buffer being filled, or -1
    bool thread_busy_ = true;    // hashing existing bytes, or a buffer taken from full_
    uint64_t taken_;             // bytes taken: in the file, queued or staged
    uint64_t in_file_;           // bytes written to the file
    uint64_t writeback_from_ = 0;  // the writeback was started for the bytes before this
    bool stop_ = false;
    std::atomic<bool> abandon_existing_{false};  // stop hashing the existing bytes: no digest
    std::exception_ptr error_;
    std::thread thread_;
};

}  // namespace minfer::hub
