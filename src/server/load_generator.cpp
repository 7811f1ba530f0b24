#include "server/load_generator.h"

#include <sys/socket.h>
#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <system_error>
#include <thread>

#include "core/error.h"

namespace minfer::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Endpoint {
    std::string host, port;
    std::string base;       // the path up to and with /v1
    std::string target;     // base + /chat/completions
    std::string authority;  // for the Host header: "host:port", "[::1]:8080"
};

Endpoint parse_url(const std::string& url) {
    constexpr std::string_view kHttp = "http://";
    if (url.rfind("https://", 0) == 0)
        throw UsageError("bench-serve speaks plain HTTP only: use an http:// URL");
    if (url.rfind(kHttp, 0) != 0) throw UsageError(concat("not an http:// URL: '", url, "'"));
    // The path goes into the request line as it is: a space or a control character would break
    // it (or inject headers).
    for (const char c : url) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte <= 0x20 || byte == 0x7f)
            throw UsageError(concat("a URL holds no spaces or control characters: '", url, "'"));
    }
    std::string rest = url.substr(kHttp.size());
    const std::size_t slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    std::string path = slash == std::string::npos ? "" : rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.pop_back();
    Endpoint e;
    e.authority = authority;
    e.port = "80";
    std::string port_part;  // what follows the host: empty or ":PORT"
    if (!authority.empty() && authority.front() == '[') {
        // An IPv6 literal, "[::1]:8080": the resolver takes the address without its brackets.
        const std::size_t close = authority.find(']');
        if (close != std::string::npos) {
            e.host = authority.substr(1, close - 1);
            port_part = authority.substr(close + 1);
        }
    } else {
        const std::size_t colon = authority.find(':');
        e.host = authority.substr(0, colon);
        if (colon != std::string::npos) port_part = authority.substr(colon);
    }
    bool port_ok = port_part.empty();
    if (port_part.size() > 1 && port_part.size() <= 6 && port_part.front() == ':' &&
        port_part.find_first_not_of("0123456789", 1) == std::string::npos) {
        const int port = std::stoi(port_part.substr(1));
        port_ok = port >= 1 && port <= 65535;
        e.port = port_part.substr(1);
    }
    if (e.host.empty() || !port_ok)
        throw UsageError(concat("bad host or port (1 to 65535) in '", url, "'"));
    const bool has_v1 = path.size() >= 3 && path.substr(path.size() - 3) == "/v1";
    e.base = path + (has_v1 ? "" : "/v1");
    e.target = e.base + "/chat/completions";
    return e;
}

// Words that are one token each (with their leading space) in the common BPE and SentencePiece
// vocabularies.
const char* const kWords[] = {"the", "cat",  "sat",   "on",  "a",   "mat", "and", "dog",
                              "ran", "to",   "house", "in",  "red", "big", "old", "man",
                              "saw", "tree", "by",    "sea", "day", "was", "it",  "of",
                              "for", "not",  "but",   "we",  "all"};

std::string random_prompt(int n_words, std::mt19937_64& rng) {
    std::uniform_int_distribution<std::size_t> pick(0, std::size(kWords) - 1);
    std::string text = "Continue this text:";
    for (int i = 0; i < n_words; ++i) {
        text += ' ';
        text += kWords[pick(rng)];
    }
    return text;
}

struct RequestTiming {
    bool ok = false;
    std::string error;
    double ttft = 0;
    std::vector<double> gaps;  // between streamed content chunks
    int64_t completion_tokens = 0;
    int64_t prompt_tokens = 0;
};

// The tokens a streamed choice carries: its log-probability entries, or (from a server that
// sends none) 1 when it carries text.
int tokens_in(const nlohmann::json& choice) {
    const auto lp = choice.find("logprobs");
    if (lp != choice.end() && lp->is_object()) {
        const auto content = lp->find("content");
        if (content != lp->end() && content->is_array()) return static_cast<int>(content->size());
    }
    const auto delta = choice.find("delta");
    if (delta == choice.end() || !delta->is_object()) return 0;
    for (const char* field : {"content", "reasoning_content"}) {
        const auto text = delta->find(field);
        if (text != delta->end() && text->is_string() && !text->get<std::string>().empty())
            return 1;
    }
    return 0;
}

// The socket of a request in flight, for the watchdog: synchronous reads have no deadline of
// their own, so a server that stalls has the socket shut under it.
struct InFlight {
    std::atomic<int> fd{-1};
    std::atomic<int64_t> started_ms{0};
};

int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch())
        .count();
}

// One streamed chat completion on a fresh connection.
RequestTiming one_request(const Endpoint& ep, const LoadTestOptions& o, const std::string& prompt,
                          InFlight& in_flight) {
    RequestTiming t;
    try {
        net::io_context ioc;
        tcp::resolver resolver(ioc);
        beast::tcp_stream stream(ioc);
        stream.expires_after(std::chrono::minutes(30));
        const auto start = Clock::now();
        stream.connect(resolver.resolve(ep.host, ep.port));
        in_flight.started_ms = now_ms();
        in_flight.fd = stream.socket().native_handle();
        struct Clear {
            InFlight& f;
            ~Clear() { f.fd = -1; }
        } clear{in_flight};
        nlohmann::json body = {{"model", o.model},
                               {"messages", {{{"role", "user"}, {"content", prompt}}}},
                               {"max_tokens", o.gen_tokens},
                               {"ignore_eos", true},
                               {"temperature", 0},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}},
                               // One log-probability entry per token: the token clock, also
                               // for tokens whose text is empty (or half a character).
                               {"logprobs", true},
                               {"top_logprobs", 0}};
        http::request<http::string_body> req{http::verb::post, ep.target, 11};
        req.set(http::field::host, ep.authority);
        req.set(http::field::content_type, "application/json");
        if (!o.api_key.empty()) req.set(http::field::authorization, "Bearer " + o.api_key);
        req.body() = body.dump();
        req.prepare_payload();
        http::write(stream, req);

        beast::flat_buffer buffer;
        http::response_parser<http::buffer_body> parser;
        // No limit (a stream is as long as the server makes it). Not boost::none: Boost 1.74's
        // parser compares a Content-Length with an empty optional as greater, so every error
        // response (which has one) failed as "body limit exceeded" and its message was lost.
        parser.body_limit(std::numeric_limits<std::uint64_t>::max());
        http::read_header(stream, buffer, parser);
        const int status = parser.get().result_int();
        std::string pending;
        char chunk[16384];
        Clock::time_point last{};
        bool first = true;
        std::string error_text;
        while (!parser.is_done()) {
            parser.get().body().data = chunk;
            parser.get().body().size = sizeof chunk;
            beast::error_code ec;
            // read_some: back with whatever arrived (read() would wait for a full buffer).
            http::read_some(stream, buffer, parser, ec);
            if (ec == http::error::need_buffer) ec = {};
            if (ec) throw beast::system_error(ec);
            pending.append(chunk, sizeof chunk - parser.get().body().size);
            if (status != 200) continue;
            std::size_t cut;
            while ((cut = pending.find("\n\n")) != std::string::npos) {
                const std::string event = pending.substr(0, cut);
                pending.erase(0, cut + 2);
                if (event.rfind("data: ", 0) != 0) continue;
                const std::string data = event.substr(6);
                if (data == "[DONE]") continue;
                const auto j = nlohmann::json::parse(data, nullptr, false);
                if (j.is_discarded()) continue;
                if (j.contains("usage") && j["usage"].is_object()) {
                    t.completion_tokens = j["usage"].value("completion_tokens", int64_t{0});
                    t.prompt_tokens = j["usage"].value("prompt_tokens", int64_t{0});
                }
                if (!j.contains("choices") || !j["choices"].is_array()) continue;
                for (const auto& c : j["choices"]) {
                    const int n = tokens_in(c);
                    if (n == 0) continue;
                    const auto now = Clock::now();
                    if (first) {
                        t.ttft = std::chrono::duration<double>(now - start).count();
                        first = false;
                    } else {
                        // A chunk of several tokens: the gap shared between them.
                        const double gap = std::chrono::duration<double>(now - last).count();
                        for (int k = 0; k < n; ++k) t.gaps.push_back(gap / n);
                    }
                    last = now;
                }
            }
        }
        if (status != 200) {
            t.error = concat("HTTP ", status, ": ", pending.substr(0, 200));
            return t;
        }
        beast::error_code ec;
        stream.socket().shutdown(tcp::socket::shutdown_both, ec);
        t.ok = !first;
        if (first) t.error = "the stream held no token";
    } catch (const std::exception& e) {
        t.error = e.what();
    }
    return t;
}

// GET base + /models: the body of a 200 response (at most kMaxListingBytes), "" otherwise.
std::string get_model_listing(const Endpoint& ep, const std::string& api_key, int timeout_seconds) {
    constexpr std::uint64_t kMaxListingBytes = 1 << 20;
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.expires_after(std::chrono::seconds(timeout_seconds));
    stream.connect(resolver.resolve(ep.host, ep.port));
    http::request<http::empty_body> req{http::verb::get, ep.base + "/models", 11};
    req.set(http::field::host, ep.authority);
    if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxListingBytes);
    http::read(stream, buffer, parser);
    beast::error_code ec;
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    return parser.get().result_int() == 200 ? parser.get().body() : "";
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

}  // namespace

ServerDevice describe_server_device(const LoadTestOptions& o) {
    ServerDevice d;
    try {
        const auto listing = nlohmann::json::parse(
            get_model_listing(parse_url(o.url), o.api_key, std::min(o.timeout_seconds, 30)),
            nullptr, false);
        if (!listing.is_object() || !listing.contains("data") || !listing["data"].is_array())
            return d;
        // The model asked for, else the first one the server says it runs.
        const nlohmann::json* chosen = nullptr;
        for (const auto& m : listing["data"]) {
            if (!m.is_object() || !m.contains("meta") || !m["meta"].is_object()) continue;
            if (chosen == nullptr || (m.contains("id") && m["id"] == o.model)) chosen = &m;
        }
        if (chosen == nullptr) return d;
        const nlohmann::json& meta = (*chosen)["meta"];
        if (meta.contains("backend") && meta["backend"].is_string())
            d.backend = meta["backend"].get<std::string>();
        if (meta.contains("device") && meta["device"].is_string())
            d.device = meta["device"].get<std::string>();
    } catch (const std::exception&) {
        // Unreachable, slow, or not a listing: the rows say nothing of the device.
    }
    return d;
}

void check_load_test_url(const std::string& url) {
    parse_url(url);
}

LoadTestResult run_load_test(const LoadTestOptions& o,
                             const std::function<void(int, int)>& progress) {
    const Endpoint ep = parse_url(o.url);
    if (o.concurrency < 1 || o.requests < 1 || o.gen_tokens < 1 || o.prompt_tokens < 0)
        throw UsageError("bench-serve: concurrency, requests and generated tokens must be >= 1");
    // What the chat template adds, learnt from one small request's usage, so that prompts come
    // out at about prompt_tokens in all (words of one token each fill the rest).
    LoadTestOptions probe = o;
    probe.gen_tokens = 1;
    std::mt19937_64 rng(o.seed);
    InFlight unwatched;
    const RequestTiming calibration = one_request(ep, probe, random_prompt(0, rng), unwatched);
    if (!calibration.ok) throw IoError(concat("bench-serve: ", o.url, ": ", calibration.error));
    const int words =
        std::max<int>(0, o.prompt_tokens - static_cast<int>(calibration.prompt_tokens));
    // Each request's prompt is made by its client just before it is sent, from a seed of its own
    // (distinct and reproducible): memory holds the prompts in flight, not one per request, so
    // --requests 16777216 costs nothing up front (it used to allocate every prompt first).
    const uint64_t prompt_seed = rng();
    const int n_clients = std::min(o.concurrency, o.requests);
    std::vector<std::vector<RequestTiming>> results(static_cast<std::size_t>(n_clients));
    std::vector<InFlight> in_flight(static_cast<std::size_t>(n_clients));
    std::atomic<int> next{0}, done{0};
    std::atomic<bool> finished{false}, abandoned{false};
    const auto stopping = [&] { return abandoned.load() || (o.stop != nullptr && o.stop->load()); };
    std::mutex progress_mutex;
    const auto start = Clock::now();
    // A request that takes longer than the timeout has its socket shut: it fails instead of
    // hanging the test. When stopping, every request in flight is cut.
    std::thread watchdog([&] {
        while (!finished) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            const bool cut_all = stopping();
            for (auto& f : in_flight) {
                const int fd = f.fd.load();
                if (fd >= 0 &&
                    (cut_all || now_ms() - f.started_ms.load() > o.timeout_seconds * 1000))
                    ::shutdown(fd, SHUT_RDWR);
            }
        }
    });
    std::vector<std::thread> clients;
    std::string start_error;
    for (int c = 0; c < n_clients; ++c) {
        try {
            clients.emplace_back([&, c] {
                const auto client = static_cast<std::size_t>(c);
                std::mt19937_64 prompt_rng;
                for (int i = next++; i < o.requests && !stopping(); i = next++) {
                    prompt_rng.seed(prompt_seed + static_cast<uint64_t>(i));
                    RequestTiming t =
                        one_request(ep, o, random_prompt(words, prompt_rng), in_flight[client]);
                    if (stopping()) break;  // cut by us, not failed by the server: not counted
                    results[client].push_back(std::move(t));
                    const int d = ++done;
                    if (progress) {
                        std::lock_guard lock(progress_mutex);
                        progress(d, o.requests);
                    }
                }
            });
        } catch (const std::system_error& e) {
            // Out of threads (ulimit -u, RLIMIT_AS for their stacks): the clients started so far
            // stop, and the command says why, instead of std::terminate on their destructors.
            start_error = concat("could not start client ", c + 1, " of ", n_clients, ": ",
                                 e.what(), "; lower --concurrency");
            abandoned = true;
            break;
        }
    }
    for (auto& t : clients) t.join();
    finished = true;
    watchdog.join();
    if (!start_error.empty()) throw LimitError(concat("bench-serve: ", start_error));

    LoadTestResult r;
    r.concurrency = n_clients;
    r.interrupted = o.stop != nullptr && o.stop->load();
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> ttfts, gaps;
    int64_t prompt_tokens = 0;
    for (const auto& client_results : results) {
        for (const RequestTiming& t : client_results) {
            ++r.requests;
            if (!t.ok) {
                ++r.failed;
                if (r.first_error.empty()) r.first_error = t.error;
                continue;
            }
            ttfts.push_back(t.ttft);
            gaps.insert(gaps.end(), t.gaps.begin(), t.gaps.end());
            r.generated_tokens += t.completion_tokens;
            prompt_tokens += t.prompt_tokens;
        }
    }
    const int ok = r.requests - r.failed;
    r.mean_prompt_tokens = ok > 0 ? static_cast<double>(prompt_tokens) / ok : 0;
    r.tokens_per_second = static_cast<double>(r.generated_tokens) / r.seconds;
    r.requests_per_second = ok / r.seconds;
    r.ttft_p50 = percentile(ttfts, 0.50);
    r.ttft_p99 = percentile(ttfts, 0.99);
    r.itl_p50 = percentile(gaps, 0.50);
    r.itl_p99 = percentile(gaps, 0.99);
    return r;
}

}  // namespace minfer::server
