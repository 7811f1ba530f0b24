#include "server/api_server.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <future>
#include <list>
#include <mutex>
#include <random>
#include <thread>

#include "backend/device.h"
#include "chat/tool_calls.h"
#include "core/log.h"
#include "hub/inventory.h"
#include "hub/reference.h"
#include "hub/resolver.h"
#include "runtime/prompt.h"
#include "server/anthropic_request.h"
#include "server/api_error.h"
#include "server/chat_page.h"
#include "server/completion_job.h"
#include "server/generation_path.h"
#include "server/generation_service.h"
#include "server/header_value.h"
#include "server/messages_job.h"
#include "server/metrics.h"
#include "server/ollama_job.h"
#include "server/ollama_models.h"
#include "server/ollama_request.h"
#include "server/openai_request.h"
#include "server/reasoning_split.h"
#include "server/request_fields.h"
#include "server/work_queue.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

// The paths of the API, with the methods each takes (llama-server also answers without /v1).
struct Route {
    const char* path;
    const char* method;
    bool needs_key;
};
constexpr Route kRoutes[] = {
    {"/", "GET", false},
    {"/assets/marked.js", "GET", false},
    {"/assets/purify.js", "GET", false},
    {"/assets/highlight.js", "GET", false},
    {"/assets/highlight.css", "GET", false},
    {"/health", "GET", false},
    {"/metrics", "GET", false},
    {"/v1/models", "GET", true},
    {"/models", "GET", true},
    {"/v1/chat/completions", "POST", true},
    {"/chat/completions", "POST", true},
    {"/v1/completions", "POST", true},
    {"/completions", "POST", true},
    {"/tokenize", "POST", true},
    {"/detokenize", "POST", true},
    {"/apply-template", "POST", true},
    {"/v1/messages", "POST", true},
    {"/v1/messages/count_tokens", "POST", true},
    // ollama's
    {"/api/chat", "POST", true},
    {"/api/generate", "POST", true},
    {"/api/tags", "GET", true},
    {"/api/show", "POST", true},
    {"/api/ps", "GET", true},
    {"/api/version", "GET", false},
    {"/api/embed", "POST", true},
    {"/api/embeddings", "POST", true},
    {"/api/pull", "POST", true},
    {"/api/push", "POST", true},
    {"/api/create", "POST", true},
    {"/api/copy", "POST", true},
    {"/api/delete", "DELETE", true},
};

// The version of ollama's API that /api/version reports: the one whose fields minfer follows
// (clients compare it to decide what to send).
constexpr const char* kOllamaApiVersion = "0.9.0";

// Anthropic's API: its errors take Anthropic's shape.
bool is_anthropic_path(std::string_view path) {
    return path.starts_with("/v1/messages");
}

// ollama's API: its errors are {"error": "message"}.
bool is_ollama_path(std::string_view path) {
    return path.starts_with("/api/");
}

std::string error_body_for(std::string_view path, const ApiError& e) {
    if (is_anthropic_path(path)) return anthropic_error_body(e.status(), e.what());
    if (is_ollama_path(path)) return dump_json({{"error", e.what()}});
    return error_body(e);
}

const Route* find_route(std::string_view path) {
    for (const Route& r : kRoutes) {
        if (path == r.path) return &r;
    }
    return nullptr;
}

// Equal strings, in a time that does not depend on where they differ.
bool constant_time_equal(std::string_view a, std::string_view b) {
    unsigned char diff = a.size() == b.size() ? 0 : 1;
    const std::size_t n = std::max(a.size(), b.size());
    for (std::size_t i = 0; i < n; ++i) {
        const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
        const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
        diff |= static_cast<unsigned char>(x ^ y);
    }
    return diff == 0;
}

std::string random_id(const char* prefix) {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    return concat(prefix, std::hex, rng(), rng() & 0xffffff);
}

HttpResponse json_response(int status, const Json& body) {
    HttpResponse r;
    r.status = status;
    r.body = dump_json(body);
    return r;
}

}  // namespace

struct ApiServer::State {
    // Declared first: destroyed last, after everything that posts to its thread.
    std::unique_ptr<HttpServer> http;
    Metrics metrics;
    std::atomic<bool> shutting_down{false};
    std::atomic<bool> shutdown_started{false};
    int64_t started_at = std::time(nullptr);
    std::unique_ptr<ModelPool> pool;
    // One model: it is loaded at start, and the server stops when that fails.
    bool single = false;
    std::atomic<bool> preloaded{false};

    mutable std::mutex mutex;  // guards the members up to `pull_cancel`
    std::exception_ptr load_error;
    std::thread stopper;  // started by shutdown(), joined by run()
    std::list<std::thread> pulls;  // /api/pull downloads, joined by the destructor
    std::atomic<bool> pull_cancel{false};
    std::promise<void> loaded;  // set when the one model is loaded or failed (or at once)
    std::shared_future<void> load_done = loaded.get_future().share();
    std::unique_ptr<WorkQueue> work = std::make_unique<WorkQueue>(2);

    GrammarCache grammars;
};

// A job's listener that holds the lease on its model until the job ends (the service drops its
// listener then): the model is not unloaded under a running request.
class LeasedListener : public JobListener {
  public:
    LeasedListener(std::shared_ptr<JobListener> inner, std::shared_ptr<ModelLease> lease)
        : inner_(std::move(inner)), lease_(std::move(lease)) {}
    void on_token(int choice, int32_t token, const std::string& text,
                  const TokenLogprobs* logprobs) override {
        inner_->on_token(choice, token, text, logprobs);
    }
    void on_choice_end(int choice, const ChoiceEnd& end) override {
        inner_->on_choice_end(choice, end);
    }
    void on_failure(const std::string& what) override { inner_->on_failure(what); }
    void on_job_end(bool started) override { inner_->on_job_end(started); }

  private:
    std::shared_ptr<JobListener> inner_;
    std::shared_ptr<ModelLease> lease_;
};

ApiServer::ApiServer(ServerOptions options, ModelCatalog catalog, ModelPool::Loader load)
    : options_(std::move(options)), state_(std::make_unique<State>()) {
    require_header_value(options_.cors_origin, "--cors-origin");
    require_header_value(options_.api_key, "the API key");
    state_->single = catalog.entries().size() == 1 && !options_.serve_cache;
    std::vector<std::string> ids;
    for (const CatalogEntry& e : catalog.entries()) ids.push_back(e.id);
    state_->pool = std::make_unique<ModelPool>(
        std::move(catalog), options_.pool,
        ServiceOptions{options_.n_parallel, options_.max_queue}, std::move(load),
        [](const std::string& line) { log_info(line); });
    state_->http = std::make_unique<HttpServer>(
        options_.host, options_.port, options_.limits,
        [this](HttpRequest request, std::shared_ptr<Reply> reply) {
            handle(std::move(request), std::move(reply));
        },
        [this](int status, std::string message, std::string_view path) {
            state_->metrics.count_request(status);
            HttpResponse r;
            r.status = status;
            r.body = error_body_for(path, ApiError(status, std::move(message)));
            r.headers = cors_headers();
            if (status == 503) r.headers.emplace_back("Retry-After", "1");
            return r;
        });
    if (state_->single) {
        log_info(concat("minfer: listening on ", url(), ", loading the model"));
        preload();
        return;
    }
    log_info(concat("minfer: listening on ", url()));
    std::string list;
    for (const std::string& id : ids) list += concat(list.empty() ? "" : ", ", id);
    log_info(concat("minfer: serving ", ids.size(), ids.size() == 1 ? " model" : " models",
                    ", each loaded when a request names it",
                    ids.empty() ? std::string(" (none yet: pull one)") : concat(": ", list),
                    "; chat page at ", url(), "/"));
    state_->loaded.set_value();
}

std::string ApiServer::url() const {
    // An IPv6 address in brackets, so that the URL printed can be used (bench-serve, browsers).
    const bool ipv6 = options_.host.find(':') != std::string::npos;
    return ipv6 ? concat("http://[", options_.host, "]:", port())
                : concat("http://", options_.host, ":", port());
}

ApiServer::~ApiServer() {
    shutdown();
    std::thread stopper;
    {
        std::lock_guard lock(state_->mutex);
        stopper = std::move(state_->stopper);
    }
    if (stopper.joinable()) stopper.join();
    state_->load_done.wait();
    std::list<std::thread> pulls;
    {
        std::lock_guard lock(state_->mutex);
        pulls = std::move(state_->pulls);
    }
    for (std::thread& t : pulls) t.join();
    state_->work.reset();  // its tasks may still reply
    state_->pool.reset();
}

int ApiServer::port() const {
    return state_->http->port();
}

// The one model, loaded at start: the server serves once it is, and stops when it fails.
void ApiServer::preload() {
    const std::string id = state_->pool->entries().front().id;
    auto failed = [this](std::exception_ptr e) {
        {
            std::lock_guard lock(state_->mutex);
            state_->load_error = e;
        }
        state_->http->stop();
        state_->loaded.set_value();
    };
    try {
        state_->pool->acquire(
            id, std::nullopt,
            [this, id](const Lease&) {
                state_->preloaded = true;
                log_info(concat("minfer: serving '", id, "' on ", url(), " (",
                                options_.n_parallel, " parallel sequences; chat page at ", url(),
                                "/)"));
                state_->loaded.set_value();
            },
            failed);
    } catch (...) {
        failed(std::current_exception());
    }
}

void ApiServer::run() {
    state_->http->run();
    state_->load_done.wait();
    std::thread stopper;
    {
        std::lock_guard lock(state_->mutex);
        stopper = std::move(state_->stopper);
    }
    if (stopper.joinable()) stopper.join();
    std::lock_guard lock(state_->mutex);
    if (state_->load_error) {
        // The loader's own error, not the 500 the requests waiting for it were given.
        try {
            std::rethrow_exception(state_->load_error);
        } catch (const ApiError& e) {
            throw Error(e.what());
        }
    }
}

void ApiServer::shutdown() {
    if (state_->shutdown_started.exchange(true)) return;
    state_->shutting_down = true;
    state_->pull_cancel = true;
    state_->http->stop_accepting();
    std::lock_guard lock(state_->mutex);
    state_->stopper = std::thread([this] {
        state_->pool->shutdown(options_.shutdown_timeout);
        // The last chunks are queued on the server's thread: let them go out before it stops.
        state_->http->post([this] { state_->http->stop(); }, std::chrono::milliseconds(200));
    });
}

HttpHeaders ApiServer::cors_headers() const {
    if (options_.cors_origin.empty()) return {};
    return {{"Access-Control-Allow-Origin", options_.cors_origin}, {"Vary", "Origin"}};
}

bool ApiServer::authorized(const HttpRequest& request) const {
    if (options_.api_key.empty()) return true;
    // Anthropic's clients send the key as x-api-key.
    if (const std::string_view key = request.header("x-api-key"); !key.empty())
        return constant_time_equal(key, options_.api_key);
    std::string_view auth = request.header("authorization");
    constexpr std::string_view kBearer = "Bearer ";
    if (auth.substr(0, kBearer.size()) != kBearer) return false;
    return constant_time_equal(auth.substr(kBearer.size()), options_.api_key);
}

void ApiServer::log_access(const HttpRequest& request, int status, int64_t prompt,
                           int64_t generated, Clock::time_point start) const {
    if (!options_.access_log) return;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    if (options_.log_format == LogFormat::Json) {
        log_info(dump_json({{"remote", request.remote},
                            {"method", request.method},
                            {"path", request.path},
                            {"status", status},
                            {"prompt_tokens", prompt},
                            {"generated_tokens", generated},
                            {"ms", std::round(ms * 10) / 10}}));
    } else {
        char t[32];
        std::snprintf(t, sizeof t, "%.1f", ms);
        log_info(concat(request.remote, " \"", request.method, " ", request.path, "\" ", status,
                        " ", prompt, "+", generated, " tokens ", t, " ms"));
    }
}

void ApiServer::respond(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                        HttpResponse response) {
    for (auto& h : cors_headers()) response.headers.push_back(std::move(h));
    state_->metrics.count_request(response.status);
    log_access(request, response.status, 0, 0, Clock::now());
    reply->send(std::move(response));
}

void ApiServer::respond_error(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                              const ApiError& e) {
    HttpResponse r;
    r.status = e.status();
    r.body = error_body_for(request.path, e);
    if (e.status() == 503) r.headers.emplace_back("Retry-After", "1");
    if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    respond(request, reply, std::move(r));
}

void ApiServer::handle(HttpRequest request, std::shared_ptr<Reply> reply) {
    const Route* route = find_route(request.path);
    if (request.method == "OPTIONS" && route != nullptr) {
        // A browser's preflight for a cross-origin request.
        HttpResponse r;
        r.status = 204;
        r.content_type.clear();
        r.headers = {{"Allow", concat(route->method, ", OPTIONS")}};
        if (!options_.cors_origin.empty()) {
            r.headers.emplace_back("Access-Control-Allow-Methods",
                                   concat(route->method, ", OPTIONS"));
            r.headers.emplace_back("Access-Control-Allow-Headers", "Authorization, Content-Type");
            r.headers.emplace_back("Access-Control-Max-Age", "600");
        }
        return respond(request, reply, std::move(r));
    }
    if (route == nullptr)
        return respond_error(request, reply,
                             ApiError(404, concat("no such endpoint: ", request.path)));
    if (request.method != route->method) {
        ApiError e(405, concat(request.path, " takes ", route->method, ", not ", request.method));
        HttpResponse r;
        r.status = 405;
        r.body = error_body_for(request.path, e);
        r.headers = {{"Allow", route->method}};
        return respond(request, reply, std::move(r));
    }
    if (route->needs_key && !authorized(request))
        return respond_error(request, reply,
                             ApiError(401,
                                      "a valid API key is needed: Authorization: Bearer KEY, or "
                                      "x-api-key: KEY",
                                      "", "invalid_api_key"));
    const std::string_view path = request.path;
    if (path == "/") {
        HttpResponse r;
        r.content_type = "text/html; charset=utf-8";
        // Scripts and styles only from the page itself and /assets/ (answers are sanitised
        // before they are shown; this stops what might slip through from loading anything).
        r.headers = {{"Content-Security-Policy",
                      "default-src 'self'; script-src 'self' 'unsafe-inline'; "
                      "style-src 'self' 'unsafe-inline'; img-src data:"},
                     {"X-Content-Type-Options", "nosniff"}};
        r.body = std::string(kChatPageHtml);
        return respond(request, reply, std::move(r));
    }
    if (const ChatAsset* asset = find_chat_asset(path)) {
        HttpResponse r;
        r.content_type = std::string(asset->content_type);
        r.headers = {{"Cache-Control", "public, max-age=86400"},
                     {"X-Content-Type-Options", "nosniff"}};
        r.body = std::string(*asset->body);
        return respond(request, reply, std::move(r));
    }
    if (path == "/health") {
        if (state_->shutting_down)
            return respond(request, reply, json_response(503, {{"status", "shutting down"}}));
        if (state_->single && !state_->preloaded)
            return respond(request, reply, json_response(503, {{"status", "loading model"}}));
        return respond(request, reply, json_response(200, {{"status", "ok"}}));
    }
    if (path == "/metrics") {
        HttpResponse r;
        r.content_type = "text/plain; version=0.0.4";
        r.body = state_->metrics.render(state_->pool->counters());
        return respond(request, reply, std::move(r));
    }
    if (path == "/api/version")
        return respond(request, reply, json_response(200, {{"version", kOllamaApiVersion}}));
    if (state_->single && !state_->preloaded)
        return respond_error(request, reply, ApiError(503, "the model is still loading"));
    // The rest reads the caches, parses JSON, renders templates and tokenizes: off the server's
    // thread.
    const Endpoint endpoint =
        path.find("chat/") != std::string_view::npos ? Endpoint::Chat : Endpoint::Text;
    auto shared = std::make_shared<const HttpRequest>(std::move(request));
    state_->work->post([this, endpoint, request = std::move(shared), reply = std::move(reply)] {
        guarded(*request, reply, [&] {
            const std::string& p = request->path;
            if (p == "/v1/models" || p == "/models" || p == "/api/tags" || p == "/api/ps")
                return answer_listing(*request, reply);
            if (p == "/tokenize" || p == "/detokenize") return handle_tokenizer(request, reply);
            if (p == "/apply-template") return handle_apply_template(request, reply);
            if (p == "/v1/messages/count_tokens") return handle_count_tokens(request, reply);
            if (p == "/v1/messages") return handle_messages(request, reply);
            if (p == "/api/chat" || p == "/api/generate")
                return handle_ollama_generation(request, reply);
            if (p == "/api/show") return handle_ollama_show(request, reply);
            if (p == "/api/pull") return handle_ollama_pull(request, reply);
            if (p == "/api/delete") return handle_ollama_delete(request, reply);
            if (is_ollama_path(p)) {
                throw ApiError(501, concat(p, " is not supported by minfer serve yet",
                                           p.starts_with("/api/embed")
                                               ? ": minfer has no embeddings yet"
                                               : ""));
            }
            handle_generation(endpoint, request, reply);
        });
    });
}

void ApiServer::guarded(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                        const std::function<void()>& fn) {
    try {
        fn();
    } catch (const ApiError& e) {
        respond_error(request, reply, e);
    } catch (const Error& e) {
        respond_error(request, reply, ApiError(400, e.what()));
    } catch (const std::exception& e) {
        respond_error(request, reply, ApiError(500, concat("internal error: ", e.what())));
    }
}

// /v1/models and /api/tags: every model served, loaded or not; /api/ps: the loaded ones.
void ApiServer::answer_listing(const HttpRequest& request, const std::shared_ptr<Reply>& reply) {
    const std::string_view path = request.path;
    if (options_.serve_cache && path != "/api/ps")
        state_->pool->sync_cached(cached_catalog_entries(hub::HubSettings::from_environment()));
    const auto loaded = state_->pool->loaded();
    if (path == "/api/ps") {
        Json models = Json::array();
        for (const LoadedModelStatus& m : loaded) {
            Json entry = ollama_model_entry(m.model->loaded.model->file(), m.id);
            // In use, or idle with a keep-alive: when it goes if no request comes; kept while
            // the server runs: far in the future, as ollama writes it.
            const auto now = std::chrono::system_clock::now();
            entry["expires_at"] =
                m.expires ? ollama_time(*m.expires)
                : m.keep_alive.count() >= 0 ? ollama_time(now + m.keep_alive)
                                            : std::string("9999-12-31T23:59:59Z");
            entry["size_vram"] = 0;
            entry["context_length"] = m.n_ctx;
            models.push_back(std::move(entry));
        }
        return respond(request, reply, json_response(200, {{"models", std::move(models)}}));
    }
    const auto entries = state_->pool->entries();
    if (path == "/api/tags") {
        Json models = Json::array();
        for (const CatalogEntry& e : entries) models.push_back(ollama_model_entry(e));
        return respond(request, reply, json_response(200, {{"models", std::move(models)}}));
    }
    Json data = Json::array();
    for (const CatalogEntry& e : entries) {
        Json m = {{"id", e.id},
                  {"object", "model"},
                  {"created", state_->started_at},
                  {"owned_by", "minfer"}};
        for (const LoadedModelStatus& l : loaded) {
            if (l.id != e.id) continue;
            const DeviceChoice& device = l.model->engine.device;
            m["meta"] = {{"n_ctx_per_sequence", l.n_ctx},
                         {"n_parallel", l.n_parallel},
                         {"n_vocab", l.model->loaded.model->hparams().n_vocab},
                         {"n_params", l.model->loaded.model->n_params()},
                         {"backend", backend_label(device)},
                         {"device", device_summary(device)}};
        }
        data.push_back(std::move(m));
    }
    respond(request, reply, json_response(200, {{"object", "list"}, {"data", std::move(data)}}));
}

std::string ApiServer::model_id(std::string_view name) {
    if (auto id = state_->pool->find(name)) return *id;
    // Started with one model: any name means it (many clients send a fixed name).
    if (state_->single) return state_->pool->entries().front().id;
    if (options_.serve_cache) {
        // Pulled by another process since the server started?
        state_->pool->sync_cached(cached_catalog_entries(hub::HubSettings::from_environment()));
        if (auto id = state_->pool->find(name)) return *id;
    }
    if (name.empty())
        throw ApiError(400, "'model' is required: this server serves several models", "model");
    const auto reference = pull_reference_for(name);
    if (options_.allow_pull && reference) {
        CatalogEntry entry;
        entry.reference = *reference;
        return state_->pool->add(std::move(entry));
    }
    throw ApiError(404,
                   concat("model '", name, "' not found",
                          reference ? concat(": pull it first (minfer pull ", *reference,
                                             ", or start the server with --allow-pull)")
                                    : std::string(": GET /v1/models lists the models served")),
                   "model", "model_not_found");
}

void ApiServer::with_model(const Request& request, const std::shared_ptr<Reply>& reply,
                           std::string_view name,
                           std::optional<std::chrono::milliseconds> keep_alive,
                           std::function<void(Lease)> then) {
    const std::string id = model_id(name);
    state_->pool->acquire(
        id, keep_alive,
        [this, request, reply, then](Lease lease) {
            guarded(*request, reply, [&] { then(std::move(lease)); });
        },
        [this, request, reply, id](std::exception_ptr e) {
            guarded(*request, reply, [&] {
                try {
                    std::rethrow_exception(e);
                } catch (const ApiError&) {
                    throw;
                } catch (const std::exception& x) {
                    throw ApiError(500, concat("model '", id, "' could not be loaded: ", x.what()));
                }
            });
        });
}

// The model a request to /tokenize, /detokenize or /apply-template names ("model", optional
// with one model served).
std::string named_model(std::string_view body) {
    const Json doc = parse_json_object(body);
    return Fields(doc).string("model").value_or("");
}

ResponseContext ApiServer::response_context(const HttpRequest& request,
                                            const std::shared_ptr<Reply>& reply,
                                            const LoadedModel& m, Clock::time_point start) {
    ResponseContext r;
    r.reply = reply;
    r.headers = cors_headers();
    r.metrics = &state_->metrics;
    r.tokenizer = m.tokenizer.get();
    r.shutting_down = &state_->shutting_down;
    r.arrival = start;
    r.on_finished = [this, request, start](int status, int64_t p, int64_t g) {
        log_access(request, status, p, g, start);
    };
    return r;
}

void ApiServer::handle_tokenizer(const Request& request, const std::shared_ptr<Reply>& reply) {
    with_model(request, reply, named_model(request->body), std::nullopt, [this, request,
                                                                         reply](Lease lease) {
        const Tokenizer& tok = *lease->model().loaded.tokenizer;
        if (request->path == "/detokenize") {
            const auto ids = parse_detokenize_request(request->body, tok.n_vocab());
            return respond(*request, reply,
                           json_response(200, {{"content", tok.detokenize(ids, false)}}));
        }
        const TokenizeRequest t = parse_tokenize_request(request->body);
        Json tokens = Json::array();
        for (const int32_t id : tok.tokenize(t.content, t.add_special, t.parse_special)) {
            if (t.with_pieces)
                tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id, true)}});
            else
                tokens.push_back(id);
        }
        respond(*request, reply, json_response(200, {{"tokens", tokens}}));
    });
}

// llama-server's /apply-template: the prompt a chat request would be given, as text.
void ApiServer::handle_apply_template(const Request& request,
                                      const std::shared_ptr<Reply>& reply) {
    auto chat = std::make_shared<const GenerationRequest>(
        parse_chat_request(request->body, options_.defaults, /*with_constraint=*/false));
    with_model(request, reply, chat->model, std::nullopt, [this, request, reply, chat](Lease lease) {
        respond(*request, reply,
                json_response(200, {{"prompt", render_chat_input(lease->model().loaded,
                                                                 chat->chat())}}));
    });
}

// Anthropic's /v1/messages/count_tokens: the prompt's length in tokens, tools included.
void ApiServer::handle_count_tokens(const Request& request, const std::shared_ptr<Reply>& reply) {
    auto gen = std::make_shared<const GenerationRequest>(
        parse_messages_request(request->body, options_.defaults, /*count_only=*/true));
    with_model(request, reply, gen->model, std::nullopt, [this, request, reply, gen](Lease lease) {
        const LoadedModel& m = lease->model().loaded;
        const auto tokens = tokenize_chat_prompt(m, render_chat_input(m, gen->chat()));
        respond(*request, reply,
                json_response(200, {{"input_tokens", static_cast<int64_t>(tokens.size())}}));
    });
}

void ApiServer::handle_messages(const Request& request, const std::shared_ptr<Reply>& reply) {
    const auto start = Clock::now();
    auto gen = std::make_shared<GenerationRequest>(
        parse_messages_request(request->body, options_.defaults));
    with_model(request, reply, gen->model, std::nullopt,
               [this, request, reply, gen, start](Lease lease) {
        const LoadedModel& m = lease->model().loaded;
        PreparedGeneration prepared = prepare(*lease, *gen);
        MessagesSetup setup;
        setup.shape = std::move(prepared.shape);
        setup.stream = gen->stream;
        setup.n_prompt = prepared.n_prompt;
        setup.id = random_id("msg_");
        setup.model = gen->model.empty() ? lease->id() : gen->model;
        setup.response = response_context(*request, reply, m, start);
        submit(lease, std::move(prepared.spec), std::make_shared<MessagesJob>(std::move(setup)),
               reply);
    });
}

void ApiServer::handle_generation(Endpoint endpoint, const Request& request,
                                  const std::shared_ptr<Reply>& reply) {
    const auto start = Clock::now();
    auto gen = std::make_shared<GenerationRequest>(
        endpoint == Endpoint::Chat ? parse_chat_request(request->body, options_.defaults)
                                   : parse_completion_request(request->body, options_.defaults));
    with_model(request, reply, gen->model, std::nullopt,
               [this, endpoint, request, reply, gen, start](Lease lease) {
        const LoadedModel& m = lease->model().loaded;
        PreparedGeneration prepared = prepare(*lease, *gen);
        CompletionSetup setup;
        setup.endpoint = endpoint;
        setup.shape = std::move(prepared.shape);
        setup.n_prompt = prepared.n_prompt;
        setup.id = random_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-");
        setup.created = std::time(nullptr);
        setup.model = gen->model.empty() ? lease->id() : gen->model;
        setup.response = response_context(*request, reply, m, start);
        setup.request = std::move(*gen);
        submit(lease, std::move(prepared.spec), std::make_shared<CompletionJob>(std::move(setup)),
               reply);
    });
}

// ollama's /api/chat and /api/generate. A request without messages or prompt is ollama's way to
// load the model ("done_reason": "load"), or with keep_alive 0 to unload it ("unload").
void ApiServer::handle_ollama_generation(const Request& request,
                                         const std::shared_ptr<Reply>& reply) {
    const auto start = Clock::now();
    const bool chat = request->path == "/api/chat";
    auto gen = std::make_shared<GenerationRequest>(
        chat ? parse_ollama_chat(request->body, options_.defaults)
             : parse_ollama_generate(request->body, options_.defaults));
    if (gen->is_chat() && gen->chat().messages.empty()) {
        auto answer = [this, request, reply, chat, gen](std::string_view reason) {
            Json loaded = {{"model", gen->model}, {"created_at", ollama_time_now()}};
            if (chat)
                loaded["message"] = {{"role", "assistant"}, {"content", ""}};
            else
                loaded["response"] = "";
            loaded["done"] = true;
            loaded["done_reason"] = reason;
            respond(*request, reply, json_response(200, loaded));
        };
        if (gen->keep_alive && gen->keep_alive->count() == 0) {
            state_->pool->unload_when_idle(model_id(gen->model));
            return answer("unload");
        }
        return with_model(request, reply, gen->model, gen->keep_alive,
                          [answer](const Lease&) { answer("load"); });
    }
    with_model(request, reply, gen->model, gen->keep_alive,
               [this, chat, request, reply, gen, start](Lease lease) {
        // ollama's load_duration: the wait for the model (a loaded model's is a few microseconds).
        const double loaded_after_ms =
            std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        const LoadedModel& m = lease->model().loaded;
        PreparedGeneration prepared = prepare(*lease, *gen);
        OllamaSetup setup;
        setup.chat = chat;
        setup.shape = std::move(prepared.shape);
        setup.stream = gen->stream;
        setup.n_prompt = prepared.n_prompt;
        setup.model = gen->model;
        setup.load_ms = loaded_after_ms;
        setup.response = response_context(*request, reply, m, start);
        submit(lease, std::move(prepared.spec), std::make_shared<OllamaJob>(std::move(setup)),
               reply);
    });
}

void ApiServer::handle_ollama_show(const Request& request, const std::shared_ptr<Reply>& reply) {
    const Json body = parse_json_object(request->body);
    const Fields f(body);
    const auto name = f.string("model") ? f.string("model") : f.string("name");
    if (!name) bad_field("model", "'model' is required");
    with_model(request, reply, *name, std::nullopt, [this, request, reply](Lease lease) {
        respond(*request, reply,
                json_response(200, ollama_show(lease->model().loaded, lease->id(),
                                               lease->service()->n_ctx())));
    });
}

namespace {

// The model a management request names: "model", or "name" as older ollama clients send it.
std::string management_name(const Fields& f) {
    const auto name = f.string("model") ? f.string("model") : f.string("name");
    if (!name || name->empty()) bad_field("model", "'model' is required");
    return *name;
}

void require_pull_allowed(bool allowed, std::string_view what) {
    if (!allowed) {
        throw ApiError(403, concat(what, " is off on this server: start minfer serve with "
                                         "--allow-pull to let clients pull and delete models"));
    }
}

}  // namespace

// ollama's /api/pull: downloads a model into the caches (progress streamed as NDJSON unless
// "stream": false) and serves it. The download runs on a thread of its own; a client that goes
// or a shutdown stops it, leaving it resumable.
void ApiServer::handle_ollama_pull(const Request& request, const std::shared_ptr<Reply>& reply) {
    const Json body = parse_json_object(request->body);
    const Fields f(body);
    const std::string name = management_name(f);
    const bool stream = f.boolean("stream").value_or(true);
    require_pull_allowed(options_.allow_pull, "pulling models");
    const auto reference = pull_reference_for(name);
    if (!reference) {
        bad_field("model", concat("'", name, "' is not a model minfer can pull: write NAME[:TAG] "
                                  "(ollama's library), hf.co/OWNER/REPO[:QUANT], hf:..., "
                                  "ollama:... or an https:// URL of a .gguf file"));
    }
    const hub::ModelReference parsed = hub::parse_reference(*reference);
    const auto start = Clock::now();
    auto cancel = std::make_shared<std::atomic<bool>>(false);
    reply->on_client_gone([cancel] { *cancel = true; });
    if (stream) {
        HttpResponse head;
        head.content_type = "application/x-ndjson";
        head.headers = cors_headers();
        reply->start_stream(std::move(head));
        reply->write(dump_json({{"status", "pulling manifest"}}) + "\n");
    }
    std::lock_guard lock(state_->mutex);
    if (state_->shutting_down) throw ApiError(503, "the server is shutting down");
    state_->pulls.emplace_back([this, request, reply, parsed, cancel, stream, start] {
        hub::DownloadEvents events;
        events.cancel = cancel.get();
        events.on_progress = [&](const hub::DownloadProgress& p) {
            if (state_->pull_cancel) *cancel = true;
            if (!stream) return;
            Json line = {{"status", concat("pulling ", p.name)}, {"digest", std::string(p.name)}};
            if (p.total) line["total"] = *p.total;
            line["completed"] = p.done;
            reply->write(dump_json(line) + "\n");
        };
        int status = 200;
        try {
            const hub::ResolvedModel r =
                hub::resolve_model(parsed, hub::ResolveMode::CacheFirst, events);
            if (options_.serve_cache) {
                state_->pool->sync_cached(
                    cached_catalog_entries(hub::HubSettings::from_environment()));
            } else {
                CatalogEntry entry;
                entry.reference = r.reference;
                entry.file = r.path;
                entry.in_cache = true;
                state_->pool->add(std::move(entry));
            }
            if (!stream) return respond(*request, reply, json_response(200, {{"status", "success"}}));
            for (const char* s : {"verifying sha256 digest", "writing manifest", "success"})
                reply->write(dump_json({{"status", s}}) + "\n");
        } catch (const std::exception& e) {
            const ApiError error(dynamic_cast<const UsageError*>(&e) != nullptr ? 400 : 500,
                                 concat("pulling '", to_string(parsed), "' failed: ", e.what()));
            if (!stream) return respond_error(*request, reply, error);
            status = error.status();
            reply->write(dump_json({{"error", error.what()}}) + "\n");
        }
        reply->end();
        state_->metrics.count_request(status);
        log_access(*request, status, 0, 0, start);
    });
}

// ollama's /api/delete: removes a model from the caches and from what the server serves (once
// the requests using it end).
void ApiServer::handle_ollama_delete(const Request& request, const std::shared_ptr<Reply>& reply) {
    const Json body = parse_json_object(request->body);
    const std::string name = management_name(Fields(body));
    require_pull_allowed(options_.allow_pull, "deleting models");
    const auto id = state_->pool->find(name);
    const auto entries = state_->pool->entries();
    const auto entry = std::find_if(entries.begin(), entries.end(),
                                    [&](const CatalogEntry& e) { return id && e.id == *id; });
    if (entry == entries.end()) throw ApiError(404, concat("model '", name, "' not found"));
    if (!entry->in_cache) {
        throw ApiError(400, concat("'", entry->id, "' was given on the command line: /api/delete "
                                   "removes only models in the caches"));
    }
    hub::remove_cached_model(entry->reference, hub::HubSettings::from_environment(), {},
                             &state_->pull_cancel);
    state_->pool->remove(entry->id);
    HttpResponse r;
    r.body = "{}";
    respond(*request, reply, std::move(r));
}

PreparedGeneration ApiServer::prepare(const ModelLease& lease, GenerationRequest& request) {
    return prepare_generation(lease.model().loaded, request, lease.service()->n_ctx(),
                              {options_.default_max_tokens, options_.seed_fixed},
                              state_->grammars);
}

void ApiServer::submit(const Lease& lease, JobSpec spec, std::shared_ptr<JobListener> job,
                       const std::shared_ptr<Reply>& reply) {
    const std::shared_ptr<GenerationService>& service = lease->service();
    const auto submitted =
        service->submit(std::move(spec), std::make_shared<LeasedListener>(std::move(job), lease));
    if (const auto* refusal = std::get_if<GenerationService::Refusal>(&submitted)) {
        throw ApiError(503, *refusal == GenerationService::Refusal::QueueFull
                                ? concat("the server is busy: ", options_.max_queue,
                                         " requests are waiting already; retry later")
                                : std::string("the server is shutting down"));
    }
    const JobId id = std::get<JobId>(submitted);
    reply->on_client_gone([weak = std::weak_ptr(service), id] {
        if (auto s = weak.lock()) s->cancel(id);
    });
}

}  // namespace minfer::server
