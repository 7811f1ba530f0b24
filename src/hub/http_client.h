#pragma once
// HTTP GET over libcurl, as the hub needs it:
//   - redirects followed here, not by libcurl (at most 10), so that the Authorization header goes
//     only to the origin the token belongs to (the hub's data comes from another host) and an
//     https -> http redirect is refused;
//   - TLS certificates always verified (libcurl's defaults, never turned off), http and https
//     only, proxies from the usual environment variables;
//   - a stall (no byte for TransferPolicy::stall_seconds) and Ctrl-C (a flag polled at least once
//     a second) abort the transfer;
//   - errors that say which host and what happened, never a header: the token cannot leak into a
//     message. URLs in messages lose their query (a CDN's signed URL is long and says nothing).
// Statuses are returned, not thrown: each protocol reads its own (the hub's X-Error-Code).

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.h"
#include "hub/hub_settings.h"

namespace minfer::hub {

// The server could not be reached or the transfer broke off (refused, reset, timed out, stalled,
// cut short): the case where a cached model is used instead. Worth retrying, unless the host name
// did not resolve: offline or misspelt, waiting would only delay the answer (five retries took 31 s).
class NetworkError : public IoError {
  public:
    explicit NetworkError(const std::string& message, bool retryable = true)
        : IoError(message), retryable_(retryable) {}
    bool retryable() const { return retryable_; }

  private:
    bool retryable_;
};

// An HTTP status that ends a request. Retryable: 408, 429 and 5xx (retry_after from the
// Retry-After header when the server sent one).
class HttpError : public IoError {
  public:
    HttpError(const std::string& message, long status, std::optional<double> retry_after)
        : IoError(message), status_(status), retry_after_(retry_after) {}
    long status() const { return status_; }
    std::optional<double> retry_after() const { return retry_after_; }
    bool retryable() const { return status_ == 408 || status_ == 429 || status_ >= 500; }

  private:
    long status_;
    std::optional<double> retry_after_;
};

struct HttpRequest {
    std::string url;
    std::vector<std::string> headers;  // "Name: value"
    // Sent as "Authorization: Bearer ..." only while the URL's origin is token_origin.
    std::optional<std::string> bearer_token;
    std::string token_origin;
    bool compressed = false;  // accept gzip/deflate (JSON), never for model bytes
};

struct HttpResponse {
    long status = 0;
    std::string url;  // the URL that answered, after redirects
    std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
    std::string body;  // the body when collected (get_small, or an error status's first 64 KiB)

    // The first header of that (lower-case) name, or "".
    std::string header(std::string_view name) const;
    // Retry-After in seconds (a number of seconds or an HTTP date), when present and sane.
    std::optional<double> retry_after() const;
};

struct TransferHooks {
    // The final (non-redirect) response's status and headers, before its body. May throw.
    std::function<void(const HttpResponse&)> on_head;
    // Body bytes of a 2xx response. May throw; the transfer stops and the exception propagates.
    std::function<void(std::span<const std::byte>)> on_body;
    const std::atomic<bool>* cancel = nullptr;
};

class HttpClient {
  public:
    explicit HttpClient(const TransferPolicy& policy);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // Throws NetworkError, Cancelled (cancel flag), FormatError (a bad redirect), IoError (TLS
    // and other failures that a retry cannot fix), or what a hook threw.
    HttpResponse get(const HttpRequest& request, const TransferHooks& hooks);
    // The whole body in memory: more than max_bytes is a FormatError.
    HttpResponse get_small(const HttpRequest& request, std::size_t max_bytes,
                           const std::atomic<bool>* cancel);

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The URL without its query or fragment, for messages.
std::string url_for_messages(std::string_view url);

// Runs `attempt` until it returns, retrying after NetworkError and retryable HttpErrors: waits
// policy.retry_delay_seconds, doubling up to max_retry_delay_seconds, or what Retry-After asks
// (more than max_retry_after_seconds is thrown at once, with the wait in the message). on_retry
// hears about each retry (what failed, the wait). The wait is cut short by the cancel flag.
void with_retries(const TransferPolicy& policy, const std::atomic<bool>* cancel,
                  const std::function<void(const std::string& what, double wait_seconds)>& on_retry,
                  const std::function<void()>& attempt);

}  // namespace minfer::hub
