#include "hub/blob_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace minfer::hub {
namespace {

std::string strerror_text(int err) {
    return std::strerror(err);
}

// The file behind `fd` opened again with O_DIRECT and the same access mode (through /proc, so
// that it is the same file even if its name was replaced meanwhile), or -1 where the file system
// or the sandbox does not allow it.
int reopen_direct(int fd) {
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    const std::string self = concat("/proc/self/fd/", fd);
    return ::open(self.c_str(), (flags & O_ACCMODE) | O_DIRECT | O_CLOEXEC);
}

}  // namespace

bool is_disk_full(int err) {
    return err == ENOSPC || err == EDQUOT;
}

BlobWriter::BlobWriter(int fd, std::filesystem::path path, DigestKind kind,
                       uint64_t size_for_git, uint64_t existing)
    : fd_(fd),
      direct_fd_(reopen_direct(fd)),
      path_(std::move(path)),
      hasher_(kind, size_for_git),
      buffers_(kBuffers),
      taken_(existing),
      in_file_(existing),
      writeback_from_(existing),
      flushed_(existing) {
    for (auto& buffer : buffers_) {
        buffer.bytes.reset(
            static_cast<std::byte*>(::operator new[](kBufferBytes, std::align_val_t{kAlign})));
    }
    for (int i = kBuffers - 1; i >= 0; --i) free_.push_back(i);
    writing_thread_ = std::thread([this] { write_loop(); });
    if (direct_fd_ >= 0) flushing_thread_ = std::thread([this] { flush_loop(); });
    hashing_thread_ = std::thread([this, existing] {
        hash_existing(existing);
        hash_loop();
    });
}

BlobWriter::~BlobWriter() {
    {
        std::lock_guard lock(mutex_);
        abandon_existing_ = true;
        if (current_ >= 0 && buffers_[current_].used > 0 && !error_) hand_over_current();
        stop_ = true;
    }
    changed_.notify_all();
    hashing_thread_.join();
    writing_thread_.join();
    if (flushing_thread_.joinable()) flushing_thread_.join();
    if (direct_fd_ >= 0) ::close(direct_fd_);
}

void BlobWriter::write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        Buffer* buffer;
        {
            std::unique_lock lock(mutex_);
            buffer = &current(lock);
        }
        // The buffer being filled belongs to this thread alone: copied without the lock.
        const std::size_t n = std::min(bytes.size(), buffer->capacity - buffer->used);
        std::memcpy(buffer->bytes.get() + buffer->used, bytes.data(), n);
        bytes = bytes.subspan(n);
        std::lock_guard lock(mutex_);
        buffer->used += n;
        taken_ += n;
        if (buffer->used == buffer->capacity) hand_over_current();
    }
}

void BlobWriter::restart() {
    std::unique_lock lock(mutex_);
    wait_until_drained(lock);
    if (::ftruncate(fd_, 0) != 0)
        throw IoError(concat(path_.string(), ": cannot truncate: ", strerror_text(errno)));
    hasher_.reset();
    taken_ = in_file_ = writeback_from_ = 0;
}

uint64_t BlobWriter::written() {
    std::lock_guard lock(mutex_);
    return taken_;
}

std::string BlobWriter::digest() {
    std::unique_lock lock(mutex_);
    wait_until_drained(lock);
    return hasher_.finish();
}

uint64_t BlobWriter::stop_and_keep() {
    std::unique_lock lock(mutex_);
    abandon_existing_ = true;  // no digest will be asked for
    try {
        wait_until_drained(lock);
    } catch (const Error&) {
        // The file keeps what reached it before the error.
    }
    changed_.wait(lock, [this] { return drained(); });
    return in_file_;
}

BlobWriter::Buffer& BlobWriter::current(std::unique_lock<std::mutex>& lock) {
    if (error_) std::rethrow_exception(error_);
    if (current_ < 0) {
        changed_.wait(lock, [this] { return !free_.empty() || error_; });
        if (error_) std::rethrow_exception(error_);
        current_ = free_.back();
        free_.pop_back();
        Buffer& buffer = buffers_[current_];
        buffer.offset = taken_;
        buffer.capacity = kBufferBytes - static_cast<std::size_t>(taken_ % kAlign);
        buffer.used = 0;
    }
    return buffers_[current_];
}

void BlobWriter::hand_over_current() {
    to_hash_.push_back(current_);
    current_ = -1;
    changed_.notify_all();
}

bool BlobWriter::drained() const {
    return to_hash_.empty() && to_write_.empty() && !hashing_ && !writing_;
}

void BlobWriter::wait_until_drained(std::unique_lock<std::mutex>& lock) {
    if (current_ >= 0) {
        if (buffers_[current_].used > 0 && !error_) {
            hand_over_current();
        } else {
            free_.push_back(current_);
            current_ = -1;
        }
    }
    changed_.wait(lock, [this] { return drained() || error_; });
    if (error_) std::rethrow_exception(error_);
}

void BlobWriter::hash_existing(uint64_t existing) {
    std::vector<std::byte> buffer(kBufferBytes);
    try {
        for (uint64_t offset = 0; offset < existing && !abandon_existing_;) {
            const std::size_t want =
                static_cast<std::size_t>(std::min<uint64_t>(buffer.size(), existing - offset));
            const ssize_t n = ::pread(fd_, buffer.data(), want, static_cast<off_t>(offset));
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                throw IoError(concat(path_.string(), ": cannot read back the bytes kept from ",
                                     "an earlier run: ",
                                     n < 0 ? strerror_text(errno) : "end of file"));
            }
            hasher_.update(std::span(buffer).first(static_cast<std::size_t>(n)));
            offset += static_cast<uint64_t>(n);
        }
    } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
    }
}

// Hashes each buffer handed over, in file order, and passes it on to be written. After an error
// the buffers are passed on unhashed (the digest will not be asked for).
void BlobWriter::hash_loop() {
    std::unique_lock lock(mutex_);
    hashing_ = false;
    changed_.notify_all();
    for (;;) {
        changed_.wait(lock, [this] { return stop_ || !to_hash_.empty(); });
        if (to_hash_.empty()) break;  // stopped, and everything handed over is passed on
        const int index = to_hash_.front();
        std::exception_ptr failure;
        if (!error_) {
            hashing_ = true;
            lock.unlock();
            try {
                const Buffer& buffer = buffers_[index];
                hasher_.update(std::span<const std::byte>(buffer.bytes.get(), buffer.used));
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
        }
        to_hash_.pop_front();
        to_write_.push_back(index);
        if (failure && !error_) error_ = failure;
        hashing_ = false;
        changed_.notify_all();
    }
    hashing_done_ = true;
    changed_.notify_all();
}

// Writes each hashed buffer, in file order, and frees it. After an error the queued bytes are
// dropped: the file keeps what reached it.
void BlobWriter::write_loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return hashing_done_ || !to_write_.empty(); });
        if (to_write_.empty()) break;  // the hashing thread stopped and everything is written
        const int index = to_write_.front();
        Buffer& buffer = buffers_[index];
        std::exception_ptr failure;
        if (!error_) {
            writing_ = true;
            lock.unlock();
            try {
                write_to_file(buffer.offset,
                              std::span<const std::byte>(buffer.bytes.get(), buffer.used));
                start_writeback(buffer.offset + buffer.used);
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
        }
        to_write_.pop_front();
        free_.push_back(index);
        if (failure && !error_) error_ = failure;
        writing_ = false;
        changed_.notify_all();
    }
    writing_done_ = true;
    changed_.notify_all();
}

// Direct writes: flushes the disk's cache behind the writer, so that the final fsync has little
// left to wait for. Its errors are not kept: the caller's fsync reports them.
void BlobWriter::flush_loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
        changed_.wait(lock, [this] { return writing_done_ || in_file_ >= flushed_ + kFlushBytes; });
        if (writing_done_) return;
        const uint64_t to = in_file_;
        lock.unlock();
        if (writes_directly()) ::fdatasync(direct_fd_);
        lock.lock();
        flushed_ = to;
    }
}

void BlobWriter::write_to_file(uint64_t offset, std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        const bool aligned = offset % kAlign == 0 &&
                             reinterpret_cast<uintptr_t>(bytes.data()) % kAlign == 0 &&
                             bytes.size() >= kAlign;
        const bool direct = writes_directly() && aligned;
        const std::size_t length = direct ? bytes.size() / kAlign * kAlign : bytes.size();
        const ssize_t n = ::pwrite(direct ? direct_fd_ : fd_, bytes.data(), length,
                                   static_cast<off_t>(offset));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && direct && errno == EINVAL) {
            // Opened, but the file system refuses this direct write (an alignment larger than
            // kAlign): buffered writes from here on.
            direct_allowed_ = false;
            continue;
        }
        if (n < 0 && is_disk_full(errno)) {
            throw DiskFull(concat("the disk holding ", path_.parent_path().string(), " is full (",
                                  strerror_text(errno), ")"));
        }
        if (n <= 0) throw IoError(concat(path_.string(), ": write failed: ", strerror_text(errno)));
        bytes = bytes.subspan(static_cast<std::size_t>(n));
        offset += static_cast<uint64_t>(n);
        std::lock_guard lock(mutex_);
        in_file_ = offset;
    }
}

// Starts (does not wait for) the disk writes of what was written through the page cache, a few
// MiB at a time (nothing to do for direct writes).
void BlobWriter::start_writeback(uint64_t to) {
    if (to - writeback_from_ < kWritebackBytes) return;
    ::sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                      static_cast<off_t>(to - writeback_from_), SYNC_FILE_RANGE_WRITE);
    writeback_from_ = to;
}

}  // namespace minfer::hub
