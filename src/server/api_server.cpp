#include "server/api_server.h"

#include <cmath>
#include <ctime>
#include <future>
#include <list>
#include <mutex>
#include <random>
#include <thread>

#include "chat/tool_calls.h"
#include "core/log.h"
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

    mutable std::mutex mutex;  // guards the three below
    std::shared_ptr<ServedModel> model;
    std::shared_ptr<GenerationService> service;
    std::exception_ptr load_error;

    std::thread loader;   // started by the constructor, joined by the destructor
    std::thread stopper;  // guarded by mutex: started by shutdown(), joined by run()
    std::promise<void> loaded;
    std::shared_future<void> load_done = loaded.get_future().share();
    std::unique_ptr<WorkQueue> work = std::make_unique<WorkQueue>(2);

    GrammarCache grammars;

    struct Ready {
        std::shared_ptr<ServedModel> model;
        std::shared_ptr<GenerationService> service;
    };
    Ready ready() const {
        std::lock_guard lock(mutex);
        return {model, service};
    }
};

ApiServer::ApiServer(ServerOptions options, std::function<ServedModel()> load)
    : options_(std::move(options)), load_(std::move(load)), state_(std::make_unique<State>()) {
    require_header_value(options_.cors_origin, "--cors-origin");
    require_header_value(options_.api_key, "the API key");
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
    log_info(concat("minfer: listening on ", url(), ", loading the model"));
    start_loading();
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
    if (state_->loader.joinable()) state_->loader.join();
    state_->work.reset();  // its tasks may still reply
}

int ApiServer::port() const {
    return state_->http->port();
}

void ApiServer::start_loading() {
    state_->loader = std::thread([this] {
        try {
            auto model = std::make_shared<ServedModel>(load_());
            // Built now rather than by the first request that constrains its answer.
            model->loaded.grammar_vocabulary();
            auto service = std::make_shared<GenerationService>(
                [&] {
                    return std::make_unique<Engine>(model->loaded.model, model->loaded.tokenizer,
                                                    model->engine);
                },
                ServiceOptions{options_.n_parallel, options_.max_queue});
            {
                std::lock_guard lock(state_->mutex);
                state_->model = std::move(model);
                state_->service = std::move(service);
            }
            log_info(concat("minfer: serving '", options_.alias, "' on ", url(), " (",
                            options_.n_parallel, " parallel sequences; chat page at ", url(),
                            "/)"));
        } catch (...) {
            {
                std::lock_guard lock(state_->mutex);
                state_->load_error = std::current_exception();
            }
            state_->http->stop();
        }
        state_->loaded.set_value();
    });
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
    if (state_->load_error) std::rethrow_exception(state_->load_error);
}

void ApiServer::shutdown() {
    if (state_->shutdown_started.exchange(true)) return;
    state_->shutting_down = true;
    state_->http->stop_accepting();
    std::lock_guard lock(state_->mutex);
    state_->stopper = std::thread([this] {
        state_->load_done.wait();  // (a model still loading is waited for)
        if (const auto service = state_->ready().service)
            service->shutdown(options_.shutdown_timeout);
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
    const auto ready = state_->ready();
    if (path == "/") {
        HttpResponse r;
        r.content_type = "text/html; charset=utf-8";
        r.headers = {{"Content-Security-Policy",
                      "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                      "img-src data:"},
                     {"X-Content-Type-Options", "nosniff"}};
        r.body = std::string(kChatPageHtml);
        return respond(request, reply, std::move(r));
    }
    if (path == "/health") {
        if (state_->shutting_down)
            return respond(request, reply, json_response(503, {{"status", "shutting down"}}));
        return respond(request, reply,
                       ready.service ? json_response(200, {{"status", "ok"}})
                                     : json_response(503, {{"status", "loading model"}}));
    }
    if (path == "/metrics") {
        HttpResponse r;
        r.content_type = "text/plain; version=0.0.4";
        r.body =
            state_->metrics.render(ready.service ? ready.service->counters() : ServiceCounters{});
        return respond(request, reply, std::move(r));
    }
    if (path == "/v1/models" || path == "/models") {
        Json m = {{"id", options_.alias},
                  {"object", "model"},
                  {"created", state_->started_at},
                  {"owned_by", "minfer"}};
        if (ready.service) {
            m["meta"] = {{"n_ctx_per_sequence", ready.service->n_ctx()},
                         {"n_parallel", options_.n_parallel},
                         {"n_vocab", ready.model->loaded.model->hparams().n_vocab},
                         {"n_params", ready.model->loaded.model->n_params()}};
        }
        return respond(request, reply,
                       json_response(200, {{"object", "list"}, {"data", Json::array({m})}}));
    }
    if (path == "/api/version")
        return respond(request, reply, json_response(200, {{"version", kOllamaApiVersion}}));
    if (!ready.service)
        return respond_error(request, reply, ApiError(503, "the model is still loading"));
    if (path == "/api/tags" || path == "/api/ps") {
        Json entry = ollama_model_entry(ready.model->loaded, options_.alias);
        if (path == "/api/ps") {
            entry["expires_at"] = "9999-12-31T23:59:59Z";  // loaded while the server runs
            entry["size_vram"] = 0;
            entry["context_length"] = ready.service->n_ctx();
        }
        return respond(request, reply,
                       json_response(200, {{"models", Json::array({std::move(entry)})}}));
    }
    // The rest parses JSON, renders templates and tokenizes: off the server's thread.
    const Endpoint endpoint =
        path.find("chat/") != std::string_view::npos ? Endpoint::Chat : Endpoint::Text;
    state_->work->post([this, endpoint, request = std::move(request), reply = std::move(reply)] {
        try {
            if (request.path == "/tokenize" || request.path == "/detokenize")
                return handle_tokenizer(request, reply);
            if (request.path == "/apply-template") return handle_apply_template(request, reply);
            if (request.path == "/v1/messages/count_tokens")
                return handle_count_tokens(request, reply);
            if (request.path == "/v1/messages") return handle_messages(request, reply);
            if (request.path == "/api/chat" || request.path == "/api/generate")
                return handle_ollama_generation(request, reply);
            if (request.path == "/api/show") return handle_ollama_show(request, reply);
            if (is_ollama_path(request.path)) {
                throw ApiError(501, concat(request.path, " is not supported by minfer serve yet",
                                           request.path.starts_with("/api/embed")
                                               ? ": minfer has no embeddings yet"
                                               : ": it serves the model it was started with"));
            }
            handle_generation(endpoint, request, reply);
        } catch (const ApiError& e) {
            respond_error(request, reply, e);
        } catch (const Error& e) {
            respond_error(request, reply, ApiError(400, e.what()));
        } catch (const std::exception& e) {
            respond_error(request, reply, ApiError(500, concat("internal error: ", e.what())));
        }
    });
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

void ApiServer::handle_tokenizer(const HttpRequest& request, const std::shared_ptr<Reply>& reply) {
    const Tokenizer& tok = *state_->ready().model->loaded.tokenizer;
    if (request.path == "/detokenize") {
        const auto ids = parse_detokenize_request(request.body, tok.n_vocab());
        return respond(request, reply,
                       json_response(200, {{"content", tok.detokenize(ids, false)}}));
    }
    const TokenizeRequest t = parse_tokenize_request(request.body);
    Json tokens = Json::array();
    for (const int32_t id : tok.tokenize(t.content, t.add_special, t.parse_special)) {
        if (t.with_pieces)
            tokens.push_back({{"id", id}, {"piece", tok.token_to_piece(id, true)}});
        else
            tokens.push_back(id);
    }
    respond(request, reply, json_response(200, {{"tokens", tokens}}));
}

// llama-server's /apply-template: the prompt a chat request would be given, as text.
void ApiServer::handle_apply_template(const HttpRequest& request,
                                      const std::shared_ptr<Reply>& reply) {
    const LoadedModel& m = state_->ready().model->loaded;
    const GenerationRequest chat =
        parse_chat_request(request.body, options_.defaults, /*with_constraint=*/false);
    respond(request, reply, json_response(200, {{"prompt", render_chat_input(m, chat.chat())}}));
}

// Anthropic's /v1/messages/count_tokens: the prompt's length in tokens, tools included.
void ApiServer::handle_count_tokens(const HttpRequest& request,
                                    const std::shared_ptr<Reply>& reply) {
    const LoadedModel& m = state_->ready().model->loaded;
    const GenerationRequest gen =
        parse_messages_request(request.body, options_.defaults, /*count_only=*/true);
    const auto tokens = tokenize_chat_prompt(m, render_chat_input(m, gen.chat()));
    respond(request, reply,
            json_response(200, {{"input_tokens", static_cast<int64_t>(tokens.size())}}));
}

void ApiServer::handle_messages(const HttpRequest& request, const std::shared_ptr<Reply>& reply) {
    const auto start = Clock::now();
    const auto [model, service] = state_->ready();
    const LoadedModel& m = model->loaded;
    GenerationRequest gen = parse_messages_request(request.body, options_.defaults);
    PreparedGeneration prepared =
        prepare_generation(m, gen, service->n_ctx(),
                           {options_.default_max_tokens, options_.seed_fixed}, state_->grammars);
    MessagesSetup setup;
    setup.shape = std::move(prepared.shape);
    setup.stream = gen.stream;
    setup.n_prompt = prepared.n_prompt;
    setup.id = random_id("msg_");
    setup.model = gen.model.empty() ? options_.alias : gen.model;
    setup.response = response_context(request, reply, m, start);
    submit(service, std::move(prepared.spec), std::make_shared<MessagesJob>(std::move(setup)),
           reply);
}

void ApiServer::handle_generation(Endpoint endpoint, const HttpRequest& request,
                                  const std::shared_ptr<Reply>& reply) {
    const auto start = Clock::now();
    const auto [model, service] = state_->ready();
    const LoadedModel& m = model->loaded;
    GenerationRequest gen = endpoint == Endpoint::Chat
                                ? parse_chat_request(request.body, options_.defaults)
                                : parse_completion_request(request.body, options_.defaults);
    PreparedGeneration prepared =
        prepare_generation(m, gen, service->n_ctx(),
                           {options_.default_max_tokens, options_.seed_fixed}, state_->grammars);
    CompletionSetup setup;
    setup.endpoint = endpoint;
    setup.shape = std::move(prepared.shape);
    setup.n_prompt = prepared.n_prompt;
    setup.id = random_id(endpoint == Endpoint::Chat ? "chatcmpl-" : "cmpl-");
    setup.created = std::time(nullptr);
    setup.model = gen.model.empty() ? options_.alias : gen.model;
    setup.response = response_context(request, reply, m, start);
    setup.request = std::move(gen);
    submit(service, std::move(prepared.spec), std::make_shared<CompletionJob>(std::move(setup)),
           reply);
}

// ollama's /api/chat and /api/generate. A request without messages or prompt is ollama's way to
// load the model: answered at once ("done_reason": "load").
void ApiServer::handle_ollama_generation(const HttpRequest& request,
                                         const std::shared_ptr<Reply>& reply) {
    const auto start = Clock::now();
    const bool chat = request.path == "/api/chat";
    const auto [model, service] = state_->ready();
    const LoadedModel& m = model->loaded;
    GenerationRequest gen = chat ? parse_ollama_chat(request.body, options_.defaults)
                                 : parse_ollama_generate(request.body, options_.defaults);
    if (gen.is_chat() && gen.chat().messages.empty()) {
        Json loaded = {{"model", gen.model}, {"created_at", ollama_time_now()}};
        if (chat)
            loaded["message"] = {{"role", "assistant"}, {"content", ""}};
        else
            loaded["response"] = "";
        loaded["done"] = true;
        loaded["done_reason"] = "load";
        return respond(request, reply, json_response(200, loaded));
    }
    PreparedGeneration prepared =
        prepare_generation(m, gen, service->n_ctx(),
                           {options_.default_max_tokens, options_.seed_fixed}, state_->grammars);
    OllamaSetup setup;
    setup.chat = chat;
    setup.shape = std::move(prepared.shape);
    setup.stream = gen.stream;
    setup.n_prompt = prepared.n_prompt;
    setup.model = gen.model;
    setup.response = response_context(request, reply, m, start);
    submit(service, std::move(prepared.spec), std::make_shared<OllamaJob>(std::move(setup)), reply);
}

void ApiServer::handle_ollama_show(const HttpRequest& request,
                                   const std::shared_ptr<Reply>& reply) {
    const auto [model, service] = state_->ready();
    const Json body = parse_json_object(request.body);
    const Fields f(body);
    if (!f.string("model") && !f.string("name")) bad_field("model", "'model' is required");
    respond(request, reply,
            json_response(200, ollama_show(model->loaded, options_.alias, service->n_ctx())));
}

void ApiServer::submit(const std::shared_ptr<GenerationService>& service, JobSpec spec,
                       std::shared_ptr<JobListener> job, const std::shared_ptr<Reply>& reply) {
    const auto submitted = service->submit(std::move(spec), std::move(job));
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
