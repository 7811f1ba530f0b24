#pragma once
// A download that never leaves a bad file under the final name:
//   - bytes go to PATH.incomplete beside the final file (huggingface_hub's name, so either tool
//     resumes the other's partial blob); a later run resumes it with a Range request and starts
//     over when the server ignores the range (200 instead of 206);
//   - the size and the checksum the hub announced are checked before an atomic rename; on a
//     mismatch the partial file is deleted and the error says so;
//   - the file lock is held from start to rename: a second process waits, then finds the file;
//   - connection errors, stalls, 5xx and 429 are retried with backoff (with_retries), resuming
//     where the file ends; Ctrl-C (the cancel flag) stops at once and leaves a resumable file;
//   - free disk space is checked before any byte is requested, or every 16 MiB when the size is
//     unknown; a full disk stops the download with a message that says what is kept and needed.
// The network thread only stages the bytes; two more threads hash them and write them, directly
// to the disk where the file system allows (hub/blob_writer.h), so that checking the bytes and
// making them durable (fsync before the rename) overlap the transfer instead of following it.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "hub/digest.h"
#include "hub/http_client.h"

namespace minfer::hub {

struct DownloadTarget {
    std::string name;              // what messages and progress call the file
    std::filesystem::path path;    // the final file
    std::filesystem::path lock;    // the lock file
    std::optional<uint64_t> size;  // announced; when unknown, the server's Content-Length is used
    ExpectedDigest digest;         // announced; empty hex: size check only
    // A file already at `path` is replaced once the new one is complete (a URL whose ETag
    // changed), instead of being taken as the download's result.
    bool replace_existing = false;
};

struct DownloadProgress {
    std::string_view name;
    uint64_t done = 0;              // bytes of the file on disk so far
    std::optional<uint64_t> total;  // when known
    uint64_t resumed_from = 0;      // bytes that were already there when this run started
    double seconds = 0;             // since this run's first request
    bool finished = false;
};

struct DownloadEvents {
    // At most about ten times a second, and once with finished = true.
    std::function<void(const DownloadProgress&)> on_progress;
    // One-line notices: waiting for another process, a retry and why, a restart.
    std::function<void(const std::string&)> on_notice;
    // The head of each 2xx answer that brings bytes (its ETag, for a URL's record).
    std::function<void(const HttpResponse&)> on_response;
    const std::atomic<bool>* cancel = nullptr;
};

struct DownloadResult {
    bool fetched = false;         // false: the file was already there (nothing requested)
    uint64_t size = 0;            // of the final file
    uint64_t bytes_received = 0;  // over the network in this run
    std::string etag;             // the final response's ETag, when fetched
};

// request_for builds the request for the file's bytes (called again for each attempt; the Range
// header is added here). on_error_status turns a non-2xx answer into the protocol's error (an
// HF "EntryNotFound", a gated repository); when it returns, a generic HttpError is thrown.
// Throws FormatError on a size or checksum mismatch (partial file deleted), IoError/NetworkError/
// HttpError when retries are exhausted, Cancelled on Ctrl-C (partial file kept).
DownloadResult download_file(HttpClient& client, const TransferPolicy& policy,
                             const std::function<HttpRequest()>& request_for,
                             const std::function<void(const HttpResponse&)>& on_error_status,
                             const DownloadTarget& target, const DownloadEvents& events);

// The partial file of `path`: PATH.incomplete.
std::filesystem::path incomplete_path(const std::filesystem::path& path);

// Throws IoError when the file system holding `dir` has less than `bytes` (plus a margin of
// 64 MiB) free for this user.
void require_free_space(const std::filesystem::path& dir, uint64_t bytes, std::string_view what);

}  // namespace minfer::hub
