#include "hub/download.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "hub/blob_writer.h"
#include "hub/file_lock.h"

namespace minfer::hub {
namespace {

constexpr uint64_t kFreeSpaceMargin = uint64_t{64} << 20;
// How often a download of unknown size asks for the free space (a statvfs each time).
constexpr uint64_t kSpaceCheckBytes = uint64_t{16} << 20;

std::string strerror_text(int err) {
    return std::strerror(err);
}

// Bytes free for this user on the file system holding `dir`; nullopt when it cannot be asked.
std::optional<uint64_t> free_bytes_at(const std::filesystem::path& dir) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
    return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

struct FileDescriptor {
    int fd = -1;
    ~FileDescriptor() {
        if (fd >= 0) ::close(fd);
    }
};

void sync_directory(const std::filesystem::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

std::optional<uint64_t> parse_uint(std::string_view s) {
    if (s.empty() || s.size() > 19) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    return v;
}

struct ContentRange {
    uint64_t start = 0, end = 0;
    std::optional<uint64_t> total;
};

// "bytes START-END/TOTAL" (TOTAL may be "*").
std::optional<ContentRange> parse_content_range(std::string_view v) {
    if (v.rfind("bytes ", 0) != 0) return std::nullopt;
    v.remove_prefix(6);
    const std::size_t dash = v.find('-'), slash = v.find('/');
    if (dash == std::string_view::npos || slash == std::string_view::npos || dash > slash)
        return std::nullopt;
    ContentRange r;
    const auto start = parse_uint(v.substr(0, dash));
    const auto end = parse_uint(v.substr(dash + 1, slash - dash - 1));
    if (!start || !end || *end < *start) return std::nullopt;
    r.start = *start;
    r.end = *end;
    const std::string_view total = v.substr(slash + 1);
    if (total != "*") {
        r.total = parse_uint(total);
        if (!r.total || *r.total <= r.end) return std::nullopt;
    }
    return r;
}

std::string describe_size(uint64_t bytes) {
    return concat(bytes, " bytes");
}

// "3.5 MiB (3670016 bytes)": readable, and exact for whoever compares it with a file.
std::string mebibytes(uint64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
    return concat(text, " (", bytes, " bytes)");
}

}  // namespace

std::filesystem::path incomplete_path(const std::filesystem::path& path) {
    return std::filesystem::path(path.string() + ".incomplete");
}

void require_free_space(const std::filesystem::path& dir, uint64_t bytes, std::string_view what) {
    // The nearest directory that exists: the cache may not have been created yet.
    std::filesystem::path probe = dir;
    std::error_code ec;
    while (!probe.empty() && !std::filesystem::exists(probe, ec) && probe != probe.parent_path())
        probe = probe.parent_path();
    const auto free_bytes = free_bytes_at(probe);
    if (!free_bytes) return;  // unknown: let the writes tell
    if (*free_bytes < bytes + kFreeSpaceMargin) {
        throw IoError(concat("not enough disk space in ", dir.string(), " for ", what,
                             ": it needs ", bytes >> 20, " MiB more and ", *free_bytes >> 20,
                             " MiB are free (keeping 64 MiB spare)"));
    }
}

DownloadResult download_file(HttpClient& client, const TransferPolicy& policy,
                             const std::function<HttpRequest()>& request_for,
                             const std::function<void(const HttpResponse&)>& on_error_status,
                             const DownloadTarget& target, const DownloadEvents& events) {
    const auto notice = [&events](const std::string& text) {
        if (events.on_notice) events.on_notice(text);
    };
    const std::filesystem::path dir = target.path.parent_path();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) throw IoError(concat(dir.string(), ": cannot create the directory: ", ec.message()));

    FileLock lock(
        target.lock,
        [&] { notice(concat("waiting for another process that is downloading ", target.name)); },
        events.cancel);

    DownloadResult result;
    struct stat st {};
    if (!target.replace_existing && ::lstat(target.path.c_str(), &st) == 0) {
        const auto existing = static_cast<uint64_t>(st.st_size);
        if (S_ISREG(st.st_mode) && (!target.size || existing == *target.size)) {
            result.size = existing;
            return result;
        }
        notice(concat(target.name, " in the cache has ", existing, " bytes instead of ",
                      target.size.value_or(0), ": downloading it again"));
        std::filesystem::remove(target.path, ec);
    }

    const std::filesystem::path partial = incomplete_path(target.path);
    FileDescriptor file;
    file.fd = ::open(partial.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (file.fd < 0)
        throw IoError(concat(partial.string(), ": cannot open: ", strerror_text(errno)));
    if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode))
        throw IoError(concat(partial.string(), ": is not a regular file"));
    uint64_t offset = static_cast<uint64_t>(st.st_size);
    std::optional<uint64_t> size = target.size;
    if (size && offset > *size) {
        if (::ftruncate(file.fd, 0) != 0)
            throw IoError(concat(partial.string(), ": cannot truncate: ", strerror_text(errno)));
        offset = 0;
    }
    if (size) require_free_space(dir, *size - offset, target.name);

    const bool check_digest = !target.digest.hex.empty();
    if (target.digest.kind == DigestKind::GitSha1 && check_digest && !size)
        throw FormatError(concat(target.name, ": a git blob id needs the size"));
    BlobWriter writer(file.fd, partial, target.digest.kind, size.value_or(0), offset);

    const uint64_t resumed_from = offset;
    const auto start = std::chrono::steady_clock::now();
    auto last_report = start - std::chrono::seconds(1);
    uint64_t received = 0;   // bytes of the current response
    uint64_t base = offset;  // file size when the current response started
    bool verification_failed = false;

    const auto report = [&](bool finished) {
        if (!events.on_progress) return;
        const auto now = std::chrono::steady_clock::now();
        if (!finished && now - last_report < std::chrono::milliseconds(100)) return;
        last_report = now;
        DownloadProgress p;
        p.name = target.name;
        p.done = base + received;
        p.total = size;
        p.resumed_from = resumed_from;
        p.seconds = std::chrono::duration<double>(now - start).count();
        p.finished = finished;
        events.on_progress(p);
    };

    // What a full disk leaves: the bytes written so far stay for the next run to resume.
    const auto disk_full_message = [&](std::string_view condition, uint64_t written) {
        const std::string needed =
            size ? concat("it needs ", mebibytes(*size - written), " more")
                 : std::string("its size was not announced, so how much more it needs is unknown");
        return concat("stopped downloading ", target.name, ": ", condition, "; ",
                      mebibytes(written), " are kept in ",
                      partial.string(), " and the next run resumes there; ", needed,
                      ": free some space and run the command again");
    };

    const auto fail_verification = [&](const std::string& message) {
        verification_failed = true;
        throw FormatError(message);
    };

    const auto attempt = [&] {
        base = writer.written();
        received = 0;
        if (size && base == *size) return;  // whole already: only the checks remain
        HttpRequest request = request_for();
        if (base > 0) request.headers.push_back(concat("Range: bytes=", base, "-"));
        TransferHooks hooks;
        hooks.cancel = events.cancel;
        hooks.on_head = [&](const HttpResponse& head) {
            if (head.status >= 200 && head.status < 300 && events.on_response)
                events.on_response(head);
            if (head.status == 206) {
                const auto range = parse_content_range(head.header("content-range"));
                if (!range || range->start != base) {
                    fail_verification(concat(target.name,
                                             ": the server answered the request for "
                                             "bytes from ",
                                             base, " with Content-Range '",
                                             head.header("content-range"), "'"));
                }
                if (range->total && size && *range->total != *size) {
                    fail_verification(concat(target.name, ": the server has ", *range->total,
                                             " bytes, but ", *size, " were announced"));
                }
                if (!size && range->total) size = range->total;
            } else if (head.status >= 200 && head.status < 300) {
                if (base > 0) {
                    notice(concat("the server ignored the range request: downloading ", target.name,
                                  " from the start"));
                    writer.restart();
                    base = 0;
                }
                const auto length = parse_uint(head.header("content-length"));
                if (length && size && *length != *size) {
                    fail_verification(concat(target.name, ": the server sends ", *length,
                                             " bytes, but ", *size, " were announced"));
                }
                if (!size && length) {
                    size = length;
                    require_free_space(dir, *size, target.name);
                }
            }
        };
        hooks.on_body = [&](std::span<const std::byte> bytes) {
            if (size && base + received + bytes.size() > *size) {
                fail_verification(concat(target.name, ": the server sent more than the ", *size,
                                         " bytes announced"));
            }
            // Without a size nothing could be checked up front: stop while the disk still has
            // its margin, as a download of known size would have refused to start.
            if (!size && (base + received) / kSpaceCheckBytes !=
                             (base + received + bytes.size()) / kSpaceCheckBytes) {
                const auto free_bytes = free_bytes_at(dir);
                if (free_bytes && *free_bytes < kFreeSpaceMargin)
                    throw DiskFull(concat("fewer than 64 MiB are left on the disk holding ",
                                          dir.string(), ", a margin kept for the system"));
            }
            writer.write(bytes);
            received += bytes.size();
            result.bytes_received += bytes.size();
            report(false);
        };
        // What arrived before a failure stays in the file: the next attempt resumes after it.
        const HttpResponse response = client.get(request, hooks);
        if (response.status == 416 && base > 0) {
            // Range not satisfiable: the server's copy is not what the partial file began.
            writer.restart();
            throw NetworkError(concat(target.name, ": the server refused the range from ", base,
                                      "; starting over"));
        }
        if (response.status < 200 || response.status >= 300) {
            if (on_error_status) on_error_status(response);
            throw HttpError(concat(url_for_messages(response.url), ": HTTP ", response.status),
                            response.status, response.retry_after());
        }
        result.etag = response.header("etag");
        const uint64_t now_written = writer.written();
        if (size && now_written < *size) {
            throw NetworkError(concat("the connection for ", target.name, " closed after ",
                                      describe_size(now_written), " of ", *size));
        }
        if (!size) size = now_written;
    };

    uint64_t final_size = 0;
    std::string digest;
    try {
        with_retries(
            policy, events.cancel,
            [&](const std::string& what, double wait) {
                notice(concat(what, "; retrying in ", wait, " s"));
            },
            attempt);
        // The last bytes may still be on their way to the disk: a full one shows here.
        final_size = writer.written();
        digest = writer.digest();
    } catch (const Cancelled&) {
        throw Cancelled(concat("interrupted; ", writer.stop_and_keep(), " bytes of ", target.name,
                               " are kept in ", partial.string(), " and the next run resumes"));
    } catch (const DiskFull& e) {
        throw IoError(disk_full_message(e.what(), writer.stop_and_keep()));
    } catch (...) {
        if (verification_failed) {
            std::filesystem::remove(partial, ec);
            try {
                throw;
            } catch (const Error& e) {
                throw FormatError(concat(e.what(), "; the partial file was deleted"));
            }
        }
        throw;
    }

    if (size && final_size != *size) {
        std::filesystem::remove(partial, ec);
        throw FormatError(concat(target.name, ": downloaded ", final_size, " bytes, but ", *size,
                                 " were announced; the file was deleted"));
    }
    if (check_digest && digest != target.digest.hex) {
        std::filesystem::remove(partial, ec);
        throw FormatError(
            concat(target.name, ": the downloaded bytes have ",
                   target.digest.kind == DigestKind::Sha256 ? "sha256 " : "git blob id ", digest,
                   " but ", target.digest.hex, " was announced; the file was deleted"));
    }
    if (::fsync(file.fd) != 0) {
        // File systems that allocate late (ext4, XFS) may only now find the disk full; what the
        // page cache held may then be lost, so the file cannot be resumed from.
        const int err = errno;
        std::filesystem::remove(partial, ec);
        if (is_disk_full(err)) {
            throw IoError(concat("stopped downloading ", target.name, ": the disk holding ",
                                 dir.string(), " filled while it was written out (",
                                 strerror_text(err), "); the partial file was deleted: free ",
                                 mebibytes(final_size), " and run the command again"));
        }
        throw IoError(concat(partial.string(), ": fsync failed: ", strerror_text(err),
                             "; the partial file was deleted"));
    }
    if (::rename(partial.c_str(), target.path.c_str()) != 0) {
        throw IoError(concat("cannot rename ", partial.string(), " to ", target.path.string(), ": ",
                             strerror_text(errno)));
    }
    sync_directory(dir);
    result.fetched = true;
    result.size = final_size;
    base = final_size;
    received = 0;
    report(true);
    return result;
}

}  // namespace minfer::hub
