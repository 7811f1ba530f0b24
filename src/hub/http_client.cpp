#include "hub/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <mutex>
#include <thread>

#include "hub/ascii.h"
#include "hub/url.h"

namespace minfer::hub {
namespace {

constexpr int kMaxRedirects = 10;
constexpr std::size_t kErrorBodyBytes = 64 * 1024;
constexpr std::size_t kMaxHeaderBytes = 256 * 1024;

void global_init() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() &&
           (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
        s.remove_suffix(1);
    return s;
}

bool is_redirect(long status) {
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

struct SlistDeleter {
    void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// What one request's callbacks share with the code that started it.
struct Transfer {
    const TransferHooks* hooks = nullptr;
    HttpResponse response;
    std::size_t header_bytes = 0;
    bool head_done = false;
    bool collect_body = false;  // get_small: collect everything
    std::size_t max_body = 0;
    std::exception_ptr error;
    // Stall detection and cancellation.
    std::chrono::steady_clock::time_point last_progress;
    curl_off_t last_now = -1;
    double stall_seconds = 30;
    bool stalled = false;
    bool cancelled = false;
};

bool response_is_final(long status) {
    return status >= 200 && !is_redirect(status);
}

size_t on_header(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t n = size * count;
    try {
        t->header_bytes += n;
        if (t->header_bytes > kMaxHeaderBytes)
            throw FormatError("the server sent more than 256 KiB of headers");
        const std::string_view line(data, n);
        if (line.rfind("HTTP/", 0) == 0) {
            // A new response (after a 100 Continue, or the first one): start over.
            t->response.headers.clear();
            t->response.status = 0;
            const std::size_t sp = line.find(' ');
            if (sp != std::string_view::npos && sp + 4 <= line.size()) {
                const std::string_view code = line.substr(sp + 1, 3);
                if (std::all_of(code.begin(), code.end(),
                                [](char c) { return c >= '0' && c <= '9'; }))
                    t->response.status = std::stol(std::string(code));
            }
            t->head_done = false;
            return n;
        }
        const std::string_view content = trim(line);
        if (content.empty()) {
            // End of a header block.
            if (response_is_final(t->response.status) && !t->head_done) {
                t->head_done = true;
                if (t->hooks != nullptr && t->hooks->on_head) t->hooks->on_head(t->response);
            }
            return n;
        }
        const std::size_t colon = content.find(':');
        if (colon != std::string_view::npos && t->response.headers.size() < 500) {
            t->response.headers.emplace_back(ascii_lower(trim(content.substr(0, colon))),
                                             std::string(trim(content.substr(colon + 1))));
        }
        return n;
    } catch (...) {
        t->error = std::current_exception();
        return 0;
    }
}

size_t on_write(char* data, size_t size, size_t count, void* user) {
    auto* t = static_cast<Transfer*>(user);
    const std::size_t n = size * count;
    const long status = t->response.status;
    if (is_redirect(status) || status < 200) return n;  // a redirect's body: ignored
    try {
        const bool ok = status >= 200 && status < 300;
        if (t->collect_body) {
            if (t->response.body.size() + n > t->max_body) {
                throw FormatError(concat("the answer of ", url_for_messages(t->response.url),
                                         " is larger than ", t->max_body, " bytes"));
            }
            t->response.body.append(data, n);
        } else if (ok && t->hooks != nullptr && t->hooks->on_body) {
            t->hooks->on_body(std::span(reinterpret_cast<const std::byte*>(data), n));
        } else if (!ok && t->response.body.size() < kErrorBodyBytes) {
            t->response.body.append(data, std::min(n, kErrorBodyBytes - t->response.body.size()));
        }
        return n;
    } catch (...) {
        t->error = std::current_exception();
        return CURL_WRITEFUNC_ERROR;
    }
}

int on_progress(void* user, curl_off_t, curl_off_t now, curl_off_t, curl_off_t) {
    auto* t = static_cast<Transfer*>(user);
    if (t->hooks != nullptr && t->hooks->cancel != nullptr && t->hooks->cancel->load()) {
        t->cancelled = true;
        return 1;
    }
    const auto clock = std::chrono::steady_clock::now();
    if (now != t->last_now) {
        t->last_now = now;
        t->last_progress = clock;
    } else if (std::chrono::duration<double>(clock - t->last_progress).count() > t->stall_seconds) {
        t->stalled = true;
        return 1;
    }
    return 0;
}

bool is_network_failure(CURLcode code) {
    switch (code) {
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2:
        case CURLE_HTTP2_STREAM:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_WEIRD_SERVER_REPLY:
            return true;
        default:
            return false;
    }
}

}  // namespace

struct HttpClient::Impl {
    CURL* curl = nullptr;
    TransferPolicy policy;
    ~Impl() {
        if (curl != nullptr) curl_easy_cleanup(curl);
    }
};

std::string HttpResponse::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k == name) return v;
    return "";
}

std::optional<double> HttpResponse::retry_after() const {
    const std::string v = header("retry-after");
    if (v.empty()) return std::nullopt;
    if (std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        if (v.size() > 9) return 1e9;
        return std::stod(v);
    }
    std::tm tm{};
    const char* end = strptime(v.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (end == nullptr) return std::nullopt;
    const double wait = std::difftime(timegm(&tm), std::time(nullptr));
    return std::max(0.0, wait);
}

std::string url_for_messages(std::string_view url) {
    const std::size_t cut = url.find_first_of("?#");
    return std::string(url.substr(0, cut));
}

HttpClient::HttpClient(const TransferPolicy& policy) : impl_(std::make_unique<Impl>()) {
    global_init();
    impl_->curl = curl_easy_init();
    impl_->policy = policy;
    if (impl_->curl == nullptr) throw IoError("libcurl could not start");
}

HttpClient::~HttpClient() = default;

HttpResponse HttpClient::get(const HttpRequest& request, const TransferHooks& hooks) {
    Transfer t;
    std::string url = request.url;
    for (int hop = 0; hop <= kMaxRedirects; ++hop) {
        const auto parsed = parse_http_url(url);
        if (!parsed) throw FormatError(concat("not an http(s) URL: ", url_for_messages(url)));
        CURL* c = impl_->curl;
        curl_easy_reset(c);
        std::unique_ptr<curl_slist, SlistDeleter> headers;
        const auto add_header = [&headers](const std::string& h) {
            curl_slist* next = curl_slist_append(headers.get(), h.c_str());
            if (next == nullptr) throw std::bad_alloc();
            (void)headers.release();
            headers.reset(next);
        };
        for (const auto& h : request.headers) add_header(h);
        if (request.bearer_token && parsed->origin() == request.token_origin)
            add_header("Authorization: Bearer " + *request.bearer_token);

        t.response = HttpResponse{};
        t.response.url = url;
        t.hooks = &hooks;
        t.header_bytes = 0;
        t.head_done = false;
        t.error = nullptr;
        t.last_progress = std::chrono::steady_clock::now();
        t.last_now = -1;
        t.stall_seconds = impl_->policy.stall_seconds;
        t.stalled = t.cancelled = false;

        char errbuf[CURL_ERROR_SIZE] = {0};
        curl_easy_setopt(c, CURLOPT_URL, url.c_str());
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "minfer/" MINFER_VERSION);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                         static_cast<long>(impl_->policy.connect_seconds * 1000));
        curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 512L * 1024);
        curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
        if (request.compressed) curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "");

        const CURLcode code = curl_easy_perform(c);
        if (t.error) std::rethrow_exception(t.error);
        const std::string where = parsed->authority();
        if (t.cancelled) throw Cancelled(concat("interrupted while talking to ", where));
        if (t.stalled) {
            throw NetworkError(
                concat(where, " sent nothing for ", impl_->policy.stall_seconds, " s"));
        }
        if (code != CURLE_OK) {
            const std::string detail = errbuf[0] != '\0' ? errbuf : curl_easy_strerror(code);
            if (is_network_failure(code)) {
                const bool unresolved =
                    code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY;
                throw NetworkError(concat(where, ": ", detail), !unresolved);
            }
            throw IoError(concat(where, ": ", detail));
        }
        if (is_redirect(t.response.status)) {
            const std::string location = t.response.header("location");
            url = resolve_redirect(url, location);
            continue;
        }
        return t.response;
    }
    throw FormatError(
        concat("more than ", kMaxRedirects, " redirects from ", url_for_messages(request.url)));
}

HttpResponse HttpClient::get_small(const HttpRequest& request, std::size_t max_bytes,
                                   const std::atomic<bool>* cancel) {
    std::string body;
    TransferHooks hooks;
    hooks.cancel = cancel;
    hooks.on_body = [&body, max_bytes, &request](std::span<const std::byte> bytes) {
        if (body.size() + bytes.size() > max_bytes) {
            throw FormatError(concat("the answer of ", url_for_messages(request.url),
                                     " is larger than ", max_bytes, " bytes"));
        }
        body.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    };
    HttpResponse r = get(request, hooks);
    if (r.status >= 200 && r.status < 300) r.body = std::move(body);
    return r;
}

void with_retries(const TransferPolicy& policy, const std::atomic<bool>* cancel,
                  const std::function<void(const std::string&, double)>& on_retry,
                  const std::function<void()>& attempt) {
    double delay = policy.retry_delay_seconds;
    for (int tries = 0;; ++tries) {
        std::optional<double> wait;
        std::string what;
        try {
            attempt();
            return;
        } catch (const NetworkError& e) {
            if (!e.retryable() || tries >= policy.retries) throw;
            what = e.what();
        } catch (const HttpError& e) {
            if (!e.retryable() || tries >= policy.retries) throw;
            what = e.what();
            if (const auto after = e.retry_after()) {
                if (*after > policy.max_retry_after_seconds) {
                    throw HttpError(concat(e.what(), "; the server asks to retry in ",
                                           static_cast<long long>(*after), " s: try again later"),
                                    e.status(), e.retry_after());
                }
                wait = *after;
            }
        }
        const double seconds = wait.value_or(delay);
        if (!wait) delay = std::min(delay * 2, policy.max_retry_delay_seconds);
        if (on_retry) on_retry(what, seconds);
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(seconds));
        while (std::chrono::steady_clock::now() < until) {
            if (cancel != nullptr && cancel->load()) throw Cancelled("interrupted");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
}

}  // namespace minfer::hub
