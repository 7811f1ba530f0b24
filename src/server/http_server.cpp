#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <deque>
#include <optional>
#include <utility>

#include "core/error.h"

namespace minfer::server {

namespace net = boost::asio;
namespace http = boost::beast::http;
using tcp = net::ip::tcp;
using boost::system::error_code;

std::string_view HttpRequest::header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
        if (n == name) return v;
    }
    return {};
}

namespace {

// Beast 1.74 hands out boost::string_view.
template <class View>
std::string_view sv(const View& v) {
    return std::string_view(v.data(), v.size());
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string status_line(int status) {
    const auto reason = http::obsolete_reason(static_cast<http::status>(status));
    return concat("HTTP/1.1 ", status, " ", sv(reason), "\r\n");
}

// The status line and headers of a response, up to and including the blank line.
std::string head_of(const HttpResponse& r, bool keep_alive, std::optional<std::size_t> length) {
    std::string h = status_line(r.status);
    if (!r.content_type.empty()) h += concat("Content-Type: ", r.content_type, "\r\n");
    for (const auto& [name, value] : r.headers) h += concat(name, ": ", value, "\r\n");
    h += length ? concat("Content-Length: ", *length, "\r\n") : "Transfer-Encoding: chunked\r\n";
    h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    return h;
}

}  // namespace

class Session;

struct HttpServer::Impl {
    net::io_context ioc{1};
    tcp::acceptor acceptor{ioc};
    HttpLimits limits;
    HttpHandler handler;
    std::function<HttpResponse(int, std::string, std::string_view)> error_response;
    std::atomic<std::size_t> connections{0};
    std::vector<std::weak_ptr<Session>> sessions;  // pruned as they end

    void accept();
};

// The Reply handed to a handler: every call is posted to the server's thread.
class ReplyImpl final : public Reply, public std::enable_shared_from_this<ReplyImpl> {
  public:
    ReplyImpl(std::weak_ptr<Session> session, net::io_context& ioc)
        : session_(std::move(session)), ioc_(ioc) {}
    void send(HttpResponse response) override;
    void start_stream(HttpResponse head) override;
    void write(std::string data) override;
    void end() override;
    bool client_gone() const override { return gone_.load(); }
    void on_client_gone(std::function<void()> callback) override;

    // On the server's thread:
    void mark_gone() {
        if (gone_.exchange(true)) return;
        if (callback_) {
            auto cb = std::move(callback_);
            callback_ = nullptr;
            cb();
        }
    }

  private:
    template <class F>
    void on_session(F&& f);

    std::weak_ptr<Session> session_;
    net::io_context& ioc_;
    std::atomic<bool> gone_{false};
    std::function<void()> callback_;  // server thread only
};

// One connection: reads a request (header, then body, each under its deadline), hands it to the
// handler, keeps a read pending meanwhile to notice the client leaving, writes the reply, and
// goes on with the next request while the connection is kept alive.
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(tcp::socket socket, HttpServer::Impl& server)
        : socket_(std::move(socket)),
          deadline_(socket_.get_executor()),
          write_deadline_(socket_.get_executor()),
          server_(server) {
        ++server_.connections;
        error_code ec;
        // Streamed tokens are small writes: send each at once (no Nagle delay).
        socket_.set_option(tcp::no_delay(true), ec);
        const auto ep = socket_.remote_endpoint(ec);
        if (!ec) remote_ = concat(ep.address().to_string(), ":", ep.port());
    }
    ~Session() { --server_.connections; }

    void start() { wait_for_request(); }

    // Refuses the connection (too many open): one response, then close.
    void refuse(int status, std::string message) {
        keep_alive_ = false;
        respond_error(status, std::move(message));
    }

    // Reply operations, on the server's thread.
    void send(HttpResponse r) {
        if (closed_ || started_) return;
        started_ = ending_ = true;
        const std::size_t n = r.body.size();
        // The answer to HEAD has the headers of the body it does not carry.
        enqueue(head_request_ ? head_of(r, keep_alive_, n)
                              : head_of(r, keep_alive_, n) + std::move(r.body));
    }
    void start_stream(HttpResponse head) {
        if (closed_ || started_) return;
        started_ = true;
        if (head_request_) keep_alive_ = false;  // (a stream to HEAD: its head, then the end)
        enqueue(head_of(head, keep_alive_, std::nullopt));
    }
    void write_chunk(std::string data) {
        if (closed_ || !started_ || ending_ || data.empty() || head_request_)
            return;  // (empty: the last chunk)
        std::string chunk = concat(std::hex, data.size(), "\r\n");
        chunk += data;
        chunk += "\r\n";
        enqueue(std::move(chunk));
    }
    void end_stream() {
        if (closed_ || !started_ || ending_) return;
        ending_ = true;
        enqueue(head_request_ ? "" : "0\r\n\r\n");
    }
    void close() {
        const auto held = std::move(hold_);
        if (closed_) return;
        closed_ = true;
        error_code ec;
        disarm(deadline_);
        disarm(write_deadline_);
        socket_.shutdown(tcp::socket::shutdown_both, ec);
        socket_.close(ec);
        if (reply_ && !response_done_) reply_->mark_gone();
    }

  private:
    // A timer whose expiry closes the connection. Each arm or disarm starts a new generation:
    // a wait that completed just before being cancelled (its handler already queued) sees an
    // old generation and does nothing.
    struct Deadline {
        explicit Deadline(const net::any_io_executor& ex) : timer(ex) {}
        net::steady_timer timer;
        uint64_t generation = 0;
    };
    void arm(Deadline& d, std::chrono::milliseconds after) {
        const uint64_t g = ++d.generation;
        d.timer.expires_after(after);
        d.timer.async_wait([self = shared_from_this(), &d, g](error_code ec) {
            if (!ec && d.generation == g) self->close();
        });
    }
    static void disarm(Deadline& d) {
        ++d.generation;
        d.timer.cancel();
    }

    void wait_for_request() {
        if (buffer_.size() > 0) return read_header();
        arm(deadline_, server_.limits.idle_timeout);
        watch_read([self = shared_from_this()] { self->read_header(); });
    }

    // A read of whatever comes next: the first bytes of a request, or (while a reply is being
    // computed) the end of the connection. `on_data` runs when bytes arrived.
    void watch_read(std::function<void()> on_data) {
        reading_ = true;
        socket_.async_read_some(buffer_.prepare(4096), [self = shared_from_this(),
                                                        on_data = std::move(on_data)](
                                                           error_code ec, std::size_t n) {
            self->reading_ = false;
            // Cancelled by finish_response to parse a pipelined request.
            if (std::exchange(self->resume_parsing_, false) && ec == net::error::operation_aborted)
                return self->read_header();
            if (ec) return self->close();
            self->buffer_.commit(n);
            on_data();
        });
    }

    void read_header() {
        if (closed_) return;
        parser_.emplace();
        parser_->header_limit(static_cast<std::uint32_t>(server_.limits.max_header_bytes));
        parser_->body_limit(server_.limits.max_body_bytes);
        arm(deadline_, server_.limits.header_timeout);
        reading_ = true;
        http::async_read_header(socket_, buffer_, *parser_,
                                [self = shared_from_this()](error_code ec, std::size_t) {
                                    self->reading_ = false;
                                    self->on_header(ec);
                                });
    }

    void on_header(error_code ec) {
        if (closed_) return;
        if (ec) return on_read_error(ec);
        const auto& req = parser_->get();
        keep_alive_ = req.keep_alive();
        if (const auto length = parser_->content_length();
            length && *length > server_.limits.max_body_bytes) {
            keep_alive_ = false;
            return respond_error(
                413, concat("the request body of ", *length, " bytes is larger than the limit of ",
                            server_.limits.max_body_bytes));
        }
        if (parser_->is_done()) return dispatch();
        arm(deadline_, server_.limits.body_timeout);
        if (lower(sv(req[http::field::expect])) == "100-continue") {
            enqueue("HTTP/1.1 100 Continue\r\n\r\n");
        }
        reading_ = true;
        http::async_read(socket_, buffer_, *parser_,
                         [self = shared_from_this()](error_code e, std::size_t) {
                             self->reading_ = false;
                             if (self->closed_) return;
                             if (e) return self->on_read_error(e);
                             self->dispatch();
                         });
    }

    void on_read_error(error_code ec) {
        keep_alive_ = false;
        if (ec == http::error::header_limit)
            return respond_error(431, concat("the request header is larger than the limit of ",
                                             server_.limits.max_header_bytes, " bytes"));
        if (ec == http::error::body_limit)
            return respond_error(413, concat("the request body is larger than the limit of ",
                                             server_.limits.max_body_bytes, " bytes"));
        // The client closed, reset or timed out: nobody to answer.
        if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
            ec == net::error::eof || ec == net::error::connection_reset ||
            ec == net::error::operation_aborted || ec == net::error::bad_descriptor)
            return close();
        respond_error(400, concat("malformed HTTP request: ", ec.message()));
    }

    void respond_error(int status, std::string message) {
        disarm(deadline_);
        // The path, when the request line was read: the error takes that API's shape.
        std::string path;
        if (parser_) {
            const auto target = sv(parser_->get().target());
            path = std::string(target.substr(0, target.find('?')));
        }
        HttpResponse r = server_.error_response(status, std::move(message), path);
        started_ = ending_ = response_done_ = false;
        send(std::move(r));
    }

    void dispatch() {
        disarm(deadline_);
        auto& msg = parser_->get();
        HttpRequest request;
        request.method = std::string(sv(msg.method_string()));
        head_request_ = msg.method() == http::verb::head;
        request.target = std::string(sv(msg.target()));
        request.path = request.target.substr(0, request.target.find('?'));
        for (const auto& field : msg)
            request.headers.emplace_back(lower(sv(field.name_string())),
                                         std::string(sv(field.value())));
        request.body = std::move(msg.body());
        request.remote = remote_;
        parser_.reset();
        started_ = ending_ = response_done_ = false;
        reply_ = std::make_shared<ReplyImpl>(weak_from_this(), server_.ioc);
        // The session keeps itself alive until this reply is written, and meanwhile a read
        // notices the client leaving, whatever is already buffered after this request.
        hold_ = shared_from_this();
        watch_client();
        server_.handler(std::move(request), reply_);
    }

    // While a reply is computed: a pending read, whose error (the client closed or reset the
    // connection) marks the reply gone at once, so its sequence ends at the next engine step.
    // Bytes it reads are pipelined requests, kept in buffer_ for after this reply; beyond
    // kPipelineBytes the socket is left unread (TCP pushes back) until the reply is written.
    void watch_client() {
        watch_read([self = shared_from_this()] {
            if (!self->response_done_) {
                if (self->buffer_.size() < kPipelineBytes) self->watch_client();
                return;
            }
            if (self->keep_alive_) return self->read_header();
            self->linger();
        });
    }

    static constexpr std::size_t kPipelineBytes = 1 << 20;

    void enqueue(std::string data) {
        queue_.push_back(std::move(data));
        do_write();
    }

    void do_write() {
        if (writing_ || closed_) return;
        if (queue_.empty()) {
            if (ending_ && started_) finish_response();
            return;
        }
        writing_ = true;
        arm(write_deadline_, server_.limits.write_timeout);
        net::async_write(socket_, net::buffer(queue_.front()),
                         [self = shared_from_this()](error_code ec, std::size_t) {
                             self->writing_ = false;
                             disarm(self->write_deadline_);
                             if (ec) return self->close();
                             self->queue_.pop_front();
                             self->do_write();
                         });
    }

    void finish_response() {
        const auto held = std::move(hold_);  // (released when this returns)
        if (response_done_) return;
        response_done_ = true;
        started_ = ending_ = false;
        if (!keep_alive_) {
            // A lingering close (as nginx does): the client may still be sending a body we refused;
            // closing now would reset the connection before it reads our answer. What it sends is
            // read and dropped for a while, then the connection goes.
            error_code ec;
            socket_.shutdown(tcp::socket::shutdown_send, ec);
            arm(deadline_, kLingerTime);
            if (!reading_) linger();
            return;
        }
        if (reading_) {
            if (buffer_.size() > 0) {
                // A pipelined request is already here: stop the watch read, then parse it.
                resume_parsing_ = true;
                error_code ec;
                socket_.cancel(ec);
                return;
            }
            // The watch read now waits for the next request.
            arm(deadline_, server_.limits.idle_timeout);
            return;
        }
        wait_for_request();
    }

    static constexpr std::chrono::milliseconds kLingerTime{3000};
    static constexpr std::size_t kLingerBytes = 64 << 20;

    void linger() {
        if (closed_) return;
        buffer_.clear();
        watch_read([self = shared_from_this()] {
            self->lingered_ += self->buffer_.size();
            if (self->lingered_ > kLingerBytes) return self->close();
            self->linger();
        });
    }

    tcp::socket socket_;
    Deadline deadline_;        // header, body or idle deadline
    Deadline write_deadline_;  // the write in progress
    HttpServer::Impl& server_;
    std::string remote_;
    boost::beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<ReplyImpl> reply_;
    std::shared_ptr<Session> hold_;  // self, while a pipelined request's reply is computed
    std::deque<std::string> queue_;
    bool reading_ = false;
    bool resume_parsing_ = false;  // the watch read was cancelled to parse a buffered request
    bool writing_ = false;
    bool keep_alive_ = true;
    bool started_ = false;       // the response's head is queued
    bool ending_ = false;        // its last byte is queued
    bool response_done_ = true;  // written in full (or none is due)
    bool closed_ = false;
    bool head_request_ = false;  // the current request is HEAD: no body in the answer
    std::size_t lingered_ = 0;   // bytes dropped after a refusal
};

template <class F>
void ReplyImpl::on_session(F&& f) {
    net::post(ioc_, [s = session_, f = std::forward<F>(f)]() mutable {
        if (auto session = s.lock()) f(*session);
    });
}

void ReplyImpl::send(HttpResponse response) {
    on_session([r = std::move(response)](Session& s) mutable { s.send(std::move(r)); });
}
void ReplyImpl::start_stream(HttpResponse head) {
    on_session([h = std::move(head)](Session& s) mutable { s.start_stream(std::move(h)); });
}
void ReplyImpl::write(std::string data) {
    on_session([d = std::move(data)](Session& s) mutable { s.write_chunk(std::move(d)); });
}
void ReplyImpl::end() {
    on_session([](Session& s) { s.end_stream(); });
}
void ReplyImpl::on_client_gone(std::function<void()> callback) {
    net::post(ioc_, [self = shared_from_this(), cb = std::move(callback)]() mutable {
        if (self->gone_.load()) return cb();
        self->callback_ = std::move(cb);
    });
}

void HttpServer::Impl::accept() {
    acceptor.async_accept([this](error_code ec, tcp::socket socket) {
        if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
        if (ec) {
            // Out of file descriptors (or buffers): the connection waits in the backlog, and
            // accepting again at once would fail again at once. Try again in a moment.
            auto timer = std::make_shared<net::steady_timer>(ioc, std::chrono::milliseconds(100));
            timer->async_wait([this, timer](error_code) { accept(); });
            return;
        }
        {
            auto session = std::make_shared<Session>(std::move(socket), *this);
            std::erase_if(sessions, [](const auto& w) { return w.expired(); });
            sessions.push_back(session);
            if (connections.load() > static_cast<std::size_t>(limits.max_connections)) {
                session->refuse(503, concat("too many connections (the limit is ",
                                            limits.max_connections, ")"));
            } else {
                session->start();
            }
        }
        accept();
    });
}

HttpServer::HttpServer(
    const std::string& host, int port, HttpLimits limits, HttpHandler handler,
    std::function<HttpResponse(int, std::string, std::string_view)> error_response)
    : impl_(std::make_unique<Impl>()) {
    impl_->limits = limits;
    impl_->handler = std::move(handler);
    impl_->error_response = std::move(error_response);
    error_code ec;
    tcp::resolver resolver(impl_->ioc);
    const auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
    if (ec || results.empty())
        throw IoError(concat("cannot listen on ", host, ":", port, ": ", ec.message()));
    const tcp::endpoint endpoint = results.begin()->endpoint();
    auto& a = impl_->acceptor;
    a.open(endpoint.protocol(), ec);
    if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) a.bind(endpoint, ec);
    if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
    if (ec) throw IoError(concat("cannot listen on ", host, ":", port, ": ", ec.message()));
    impl_->accept();
}

HttpServer::~HttpServer() = default;

int HttpServer::port() const {
    error_code ec;
    return impl_->acceptor.local_endpoint(ec).port();
}

void HttpServer::run() {
    impl_->ioc.run();
}

void HttpServer::stop_accepting() {
    net::post(impl_->ioc, [this] {
        error_code ec;
        impl_->acceptor.close(ec);
    });
}

void HttpServer::stop() {
    net::post(impl_->ioc, [this] {
        error_code ec;
        impl_->acceptor.close(ec);
        for (const auto& w : impl_->sessions) {
            if (auto s = w.lock()) s->close();
        }
        impl_->ioc.stop();
    });
}

void HttpServer::post(std::function<void()> f, std::chrono::milliseconds delay) {
    if (delay.count() <= 0) return net::post(impl_->ioc, std::move(f));
    auto timer = std::make_shared<net::steady_timer>(impl_->ioc, delay);
    timer->async_wait([timer, f = std::move(f)](error_code ec) {
        if (!ec) f();
    });
}

}  // namespace minfer::server
