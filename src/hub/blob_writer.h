#pragma once
// The file side of a download: takes the bytes as the network delivers them, hashes them and
// writes them to the partial file, with as little work as possible on the network thread.
//
// Three stages, each on its own thread, hand 1 MiB staging buffers (8 of them, reused) along in
// file order: the network thread copies each piece it receives into the buffer being filled; a
// hashing thread hashes every full buffer from memory; a writing thread writes it with one
// write(). Where the file system allows, the writes bypass the page cache (O_DIRECT: the bytes go
// from the buffer to the disk, without the copy into the page cache and the page allocation that
// cost buffered writes 0.35-2 s of CPU per GiB here; the unaligned head of a resumed file and the
// tail go through the page cache), and a fourth thread flushes the disk's own cache every 64 MiB
// (fdatasync on the direct descriptor, so that an error it meets is still reported to the final
// fsync on the caller's). Elsewhere the writes are buffered and their writeback to disk is started
// as they go (sync_file_range). Either way the final fsync waits only for the tail. See
// docs/hub.md for the figures that chose this.
//
// The bytes already in the file when a download resumes are hashed first, from the file.
// Errors of the other threads (a full disk: DiskFull) reach the network thread at its next call.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <new>
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
    // `fd` is open for writing (and reading, to hash what a resumed file holds); `existing` is
    // the number of bytes already there.
    BlobWriter(int fd, std::filesystem::path path, DigestKind kind, uint64_t size_for_git,
               uint64_t existing);
    // Writes what is staged (errors ignored: the file keeps what reached it) and stops the threads.
    ~BlobWriter();
    BlobWriter(const BlobWriter&) = delete;
    BlobWriter& operator=(const BlobWriter&) = delete;

    // On the network thread. Throws another thread's error, if there was one.
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
    // Whether the writes bypass the page cache (O_DIRECT); for tests and figures.
    bool writes_directly() const { return direct_fd_ >= 0 && direct_allowed_; }

  private:
    // Direct writes need offsets, lengths and memory aligned to the disk's logical block.
    static constexpr std::size_t kAlign = 4096;
    static constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
    static constexpr int kBuffers = 16;
    static constexpr uint64_t kWritebackBytes = uint64_t{16} << 20;
    static constexpr uint64_t kFlushBytes = uint64_t{64} << 20;

    struct AlignedDelete {
        void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{kAlign}); }
    };
    struct Buffer {
        std::unique_ptr<std::byte[], AlignedDelete> bytes;
        uint64_t offset = 0;        // where its first byte goes in the file
        std::size_t capacity = 0;   // so that a full buffer ends at an aligned offset
        std::size_t used = 0;
    };

    void hash_existing(uint64_t existing);
    void hash_loop();
    void write_loop();
    void write_to_file(uint64_t offset, std::span<const std::byte> bytes);
    void start_writeback(uint64_t to);
    void flush_loop();
    // With the lock held: the staging buffer in use, taking a free one (waiting) when needed.
    Buffer& current(std::unique_lock<std::mutex>& lock);
    void hand_over_current();  // lock held
    bool drained() const;      // lock held
    void wait_until_drained(std::unique_lock<std::mutex>& lock);

    int fd_;
    int direct_fd_ = -1;  // the same file opened with O_DIRECT, or -1
    std::atomic<bool> direct_allowed_{true};  // false once the file system refused a direct write
    std::filesystem::path path_;
    Hasher hasher_;  // the hashing thread's, or anyone's while the queues are drained
    std::mutex mutex_;
    std::condition_variable changed_;  // any of the state below changed
    std::vector<Buffer> buffers_;
    std::deque<int> to_hash_, to_write_;  // buffers waiting for each thread, in file order
    std::vector<int> free_;
    int current_ = -1;          // the buffer being filled, or -1
    bool hashing_ = true;       // hashing the existing bytes, or a buffer taken from to_hash_
    bool writing_ = false;      // writing a buffer taken from to_write_
    bool hashing_done_ = false; // the hashing thread has stopped: nothing more comes to write
    bool writing_done_ = false; // the writing thread has stopped: nothing more to flush
    uint64_t taken_;            // bytes taken: in the file, queued or staged
    uint64_t in_file_;          // bytes written to the file
    uint64_t writeback_from_ = 0;  // the writeback was started for the bytes before this
    uint64_t flushed_;             // direct writes: the disk's cache was flushed up to here
    bool stop_ = false;
    std::atomic<bool> abandon_existing_{false};  // stop hashing the existing bytes: no digest
    std::exception_ptr error_;
    std::thread hashing_thread_, writing_thread_, flushing_thread_;
};

}  // namespace minfer::hub
