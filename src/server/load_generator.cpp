#include "server/load_generator.h"

#include <sys/socket.h>
#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
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
    std::string host, port, target;
};

Endpoint parse_url(const std::string& url) {
    constexpr std::string_view kHttp = "http://";
    if (url.rfind("https://", 0) == 0)
        throw UsageError("bench-serve speaks plain HTTP only: use an http:// URL");
    if (url.rfind(kHttp, 0) != 0) throw UsageError(concat("not an http:// URL: '", url, "'"));
    std::string rest = url.substr(kHttp.size());
    const std::size_t slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    std::string path = slash == std::string::npos ? "" : rest.substr(slash);
    while (!path.empty() && path.back() == '/') path.pop_back();
    Endpoint e;
    const std::size_t colon = authority.rfind(':');
    if (colon != std::string::npos && authority.find(']') == std::string::npos) {
        e.host = authority.substr(0, colon);
        e.port = authority.substr(colon + 1);
    } else {
        e.host = authority;
        e.port = "80";
    }
    if (e.host.empty() || e.port.empty() ||
        e.port.find_first_not_of("0123456789") != std::string::npos)
        throw UsageError(concat("bad host or port in '", url, "'"));
    const bool has_v1 = path.size() >= 3 && path.substr(path.size() - 3) == "/v1";
    e.target = path + (has_v1 ? "" : "/v1") + "/chat/completions";
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
        req.set(http::field::host, ep.host);
        req.set(http::field::content_type, "application/json");
        if (!o.api_key.empty()) req.set(http::field::authorization, "Bearer " + o.api_key);
        req.body() = body.dump();
        req.prepare_payload();
        http::write(stream, req);

        beast::flat_buffer buffer;
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
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

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

}  // namespace

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
    // The prompts, made before the clock starts.
    std::vector<std::string> prompts;
    for (int i = 0; i < o.requests; ++i) prompts.push_back(random_prompt(words, rng));

    std::vector<RequestTiming> timings(static_cast<std::size_t>(o.requests));
    std::atomic<int> next{0}, done{0};
    std::mutex progress_mutex;
    const auto start = Clock::now();
    std::vector<std::thread> clients;
    const int n_clients = std::min(o.concurrency, o.requests);
    std::vector<InFlight> in_flight(static_cast<std::size_t>(n_clients));
    std::atomic<bool> finished{false};
    // A request that takes longer than the timeout has its socket shut: it fails instead of
    // hanging the test.
    std::thread watchdog([&] {
        while (!finished) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            for (auto& f : in_flight) {
                const int fd = f.fd.load();
                if (fd >= 0 && now_ms() - f.started_ms.load() > o.timeout_seconds * 1000)
                    ::shutdown(fd, SHUT_RDWR);
            }
        }
    });
    for (int c = 0; c < n_clients; ++c) {
        clients.emplace_back([&, c] {
            for (int i = next++; i < o.requests; i = next++) {
                timings[static_cast<std::size_t>(i)] =
                    one_request(ep, o, prompts[static_cast<std::size_t>(i)],
                                in_flight[static_cast<std::size_t>(c)]);
                const int d = ++done;
                if (progress) {
                    std::lock_guard lock(progress_mutex);
                    progress(d, o.requests);
                }
            }
        });
    }
    for (auto& t : clients) t.join();
    finished = true;
    watchdog.join();
    LoadTestResult r;
    r.concurrency = o.concurrency;
    r.requests = o.requests;
    r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> ttfts, gaps;
    int64_t prompt_tokens = 0;
    for (const RequestTiming& t : timings) {
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
