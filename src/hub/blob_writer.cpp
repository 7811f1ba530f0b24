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

}  // namespace

bool is_disk_full(int err) {
    return err == ENOSPC || err == EDQUOT;
}

BlobWriter::BlobWriter(int fd, std::filesystem::path path, DigestKind kind,
                       uint64_t size_for_git, uint64_t existing)
    : fd_(fd),
      path_(std::move(path)),
      hasher_(kind, size_for_git),
      buffers_(kBuffers),
      taken_(existing),
      in_file_(existing),
      writeback_from_(existing) {
    for (auto& buffer : buffers_) buffer.bytes.resize(kBufferBytes);
    for (int i = kBuffers - 1; i >= 0; --i) free_.push_back(i);
    thread_ = std::thread([this, existing] {
        hash_existing(existing);
        run();
    });
}

BlobWriter::~BlobWriter() {
    {
        std::lock_guard lock(mutex_);
        abandon_existing_ = true;
        if (current_ >= 0 && buffers_[current_].used > 0 && !error_) hand_over_current();
        stop_ = true;
    }
    work_.notify_all();
    thread_.join();
}

void BlobWriter::write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        Buffer* buffer;
        {
            std::unique_lock lock(mutex_);
            buffer = &current(lock);
        }
        // The buffer being filled belongs to this thread alone: copied without the lock.
        const std::size_t n = std::min(bytes.size(), kBufferBytes - buffer->used);
        std::memcpy(buffer->bytes.data() + buffer->used, bytes.data(), n);
        bytes = bytes.subspan(n);
        std::lock_guard lock(mutex_);
        buffer->used += n;
        taken_ += n;
        if (buffer->used == kBufferBytes) hand_over_current();
    }
}

void BlobWriter::restart() {
    std::unique_lock lock(mutex_);
    wait_until_drained(lock);
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0)
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
    done_.wait(lock, [this] { return full_.empty() && !thread_busy_; });
    return in_file_;
}

BlobWriter::Buffer& BlobWriter::current(std::unique_lock<std::mutex>& lock) {
    if (error_) std::rethrow_exception(error_);
    if (current_ < 0) {
        done_.wait(lock, [this] { return !free_.empty() || error_; });
        if (error_) std::rethrow_exception(error_);
        current_ = free_.back();
        free_.pop_back();
    }
    return buffers_[current_];
}

void BlobWriter::hand_over_current() {
    full_.push_back(current_);
    current_ = -1;
    work_.notify_one();
}

void BlobWriter::wait_until_drained(std::unique_lock<std::mutex>& lock) {
    if (current_ >= 0) {
        if (buffers_[current_].used > 0 && !error_) {
            hand_over_current();
        } else {
            buffers_[current_].used = 0;
            free_.push_back(current_);
            current_ = -1;
        }
    }
    done_.wait(lock, [this] { return (full_.empty() && !thread_busy_) || error_; });
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

void BlobWriter::run() {
    std::unique_lock lock(mutex_);
    thread_busy_ = false;
    done_.notify_all();
    for (;;) {
        work_.wait(lock, [this] { return stop_ || !full_.empty(); });
        if (full_.empty()) return;  // stopped, and everything handed over is written
        const int index = full_.front();
        Buffer& buffer = buffers_[index];
        std::exception_ptr failure;
        if (!error_) {
            thread_busy_ = true;
            lock.unlock();
            try {
                const auto bytes = std::span<const std::byte>(buffer.bytes).first(buffer.used);
                hasher_.update(bytes);
                write_to_file(bytes);
                start_writeback();
            } catch (...) {
                failure = std::current_exception();
            }
            lock.lock();
        }
        // After an error the queued bytes are dropped: the file keeps what reached it.
        full_.pop_front();
        buffer.used = 0;
        free_.push_back(index);
        if (failure && !error_) error_ = failure;
        thread_busy_ = false;
        done_.notify_all();
    }
}

void BlobWriter::write_to_file(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && is_disk_full(errno)) {
            throw DiskFull(concat("the disk holding ", path_.parent_path().string(), " is full (",
                                  strerror_text(errno), ")"));
        }
        if (n <= 0) throw IoError(concat(path_.string(), ": write failed: ", strerror_text(errno)));
        bytes = bytes.subspan(static_cast<std::size_t>(n));
        std::lock_guard lock(mutex_);
        in_file_ += static_cast<uint64_t>(n);
    }
}

// Starts (does not wait for) the disk writes of what was written, a few MiB at a time.
void BlobWriter::start_writeback() {
    uint64_t to;
    {
        std::lock_guard lock(mutex_);
        to = in_file_;
    }
    if (to - writeback_from_ < kWritebackBytes) return;
    ::sync_file_range(fd_, static_cast<off_t>(writeback_from_),
                      static_cast<off_t>(to - writeback_from_), SYNC_FILE_RANGE_WRITE);
    writeback_from_ = to;
}

}  // namespace minfer::hub
