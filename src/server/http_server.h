#pragma once
// The HTTP/1.1 server under the API: Boost.Asio sockets on one thread, requests parsed by
// Boost.Beast's parser, responses written by us (whole, or chunked for server-sent events).
//
// Why not cpp-httplib: its Debian version (0.11.4) has per-read timeouts only (a client sending
// one byte a second keeps a thread forever), no cap on the number of headers, no way to learn that
// a client went away while a non-streamed response is being computed, and a thread per connection
// from a fixed pool of 8 (a ninth client waits). Here every connection is a few hundred bytes of
// state on one thread, with a deadline for the whole header and for the whole body, a cap on
// header bytes (which caps their count) and on connections, and a read kept pending while a
// response is computed, so a client that closes its connection is noticed at once.
//
// Handlers run on the server's thread and must not block: they hand the work elsewhere and answer
// through the Reply, from any thread.

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace minfer::server {

struct HttpLimits {
    std::size_t max_header_bytes = 16 * 1024;  // request line and headers: caps their count too
    std::size_t max_body_bytes = 8 * 1024 * 1024;
    std::chrono::milliseconds header_timeout{10'000};  // for the whole header, from its first byte
    std::chrono::milliseconds body_timeout{30'000};    // for the whole body
    std::chrono::milliseconds idle_timeout{75'000};    // a kept-alive connection between requests
    std::chrono::milliseconds write_timeout{30'000};   // one write to a client that stops reading
    int max_connections = 512;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
    std::string method;   // "GET", "POST", ...
    std::string target;   // as sent: "/v1/models?x=1"
    std::string path;     // the target without its query
    HttpHeaders headers;  // names lower-cased, in the order sent
    std::string body;
    std::string remote;  // "127.0.0.1:52044"
    // The first header of that (lower-case) name, or empty.
    std::string_view header(std::string_view name) const;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    HttpHeaders headers;  // more headers (names and values must hold no CR or LF)
    std::string body;     // ignored by Reply::start_stream
};

// The answer to one request. Thread-safe: call it from any thread. Either send() once, or
// start_stream(), then write() any number of times, then end(). What is called after the client
// went away is dropped.
class Reply {
  public:
    virtual ~Reply() = default;
    virtual void send(HttpResponse response) = 0;
    virtual void start_stream(HttpResponse head) = 0;  // Transfer-Encoding: chunked
    virtual void write(std::string data) = 0;          // one chunk
    virtual void end() = 0;
    // True once the client closed or reset its connection, or stopped reading for write_timeout.
    virtual bool client_gone() const = 0;
    // Called once on the server's thread when the client goes before the reply ended (at once,
    // posted, if it went already).
    virtual void on_client_gone(std::function<void()> callback) = 0;
};

using HttpHandler = std::function<void(HttpRequest, std::shared_ptr<Reply>)>;

class HttpServer {
  public:
    // Binds and listens (port 0: any free port, see port()). Throws IoError naming the address.
    // `error_response` builds the answer to a request the server refuses itself (431 header too
    // large, 413 body too large, 400 malformed, 503 too many connections), given the request's
    // path when its header was read (else empty).
    HttpServer(const std::string& host, int port, HttpLimits limits, HttpHandler handler,
               std::function<HttpResponse(int status, std::string message, std::string_view path)>
                   error_response);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    int port() const;
    // Serves on the calling thread until stop().
    void run();
    // Thread-safe. Closes the listening socket: new connections are refused, open ones go on.
    void stop_accepting();
    // Thread-safe. Closes every connection and makes run() return.
    void stop();
    // Runs f on the server's thread (after `delay`).
    void post(std::function<void()> f, std::chrono::milliseconds delay = {});

    struct Impl;  // (public only so that the connections in the .cpp can name it)

  private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace minfer::server
