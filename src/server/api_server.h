#pragma once
// `minfer serve`: the OpenAI-compatible API (and Anthropic's Messages API) over the HTTP server,
// the generation service and the metrics. Routes:
//   POST /v1/chat/completions, POST /v1/completions   (streamed as server-sent events on request)
//   POST /v1/messages, POST /v1/messages/count_tokens (Anthropic's, with its error shape)
//   POST /api/chat, /api/generate, /api/show, /api/pull, DELETE /api/delete,
//   GET /api/tags, /api/ps, /api/version (ollama's)
//   GET  /v1/models, GET /health, GET /metrics, POST /tokenize, POST /detokenize, GET / (chat page)
// It serves the models of a catalogue (server/model_catalog.h) through a pool that loads them on
// first use (server/model_pool.h). The socket is bound at once. With one model, that model loads
// in the background at start (/health answers 503 until it is ready, the API 503 with
// Retry-After) and any model name means it; with several, each loads when a request names it.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/engine.h"
#include "runtime/loaded_model.h"
#include "server/http_server.h"
#include "server/model_catalog.h"
#include "server/model_pool.h"

namespace minfer::server {

enum class Endpoint;
class ApiError;
struct GenerationRequest;
struct PreparedGeneration;
class GenerationService;
class JobListener;
struct JobSpec;
struct ResponseContext;
enum class LogFormat { Text, Json };

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8080;
    int n_parallel = 4;
    int max_queue = 64;
    std::string api_key;      // empty: no authentication
    std::string cors_origin;  // empty: no CORS headers
    LogFormat log_format = LogFormat::Text;
    bool access_log = true;
    HttpLimits limits;
    std::chrono::milliseconds shutdown_timeout{10'000};
    SamplingParams defaults;  // for fields a request leaves out
    bool seed_fixed = false;
    int64_t default_max_tokens = -1;  // for requests without max_tokens (-1: until the end)  //
                                      // defaults.seed applies to requests without one (else random)
    PoolLimits pool;
    // Clients may pull models into the caches (/api/pull, and requests naming a model that is
    // not there yet) and delete them (/api/delete).
    bool allow_pull = false;
    // The catalogue is what the caches hold (serve without MODEL): it is read again when a
    // client lists the models or names one the catalogue lacks.
    bool serve_cache = false;
};

class ApiServer {
  public:
    // Binds the socket (IoError if it cannot); with one model in the catalogue, starts loading it.
    // Says where it listens, and when it serves, through the log sink.
    ApiServer(ServerOptions options, ModelCatalog catalog, ModelPool::Loader load);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    int port() const;
    std::string url() const;  // http://HOST:PORT
    // Serves until shutdown() has finished; rethrows what loading the one model threw.
    void run();
    // Thread-safe, once: stops accepting connections, lets running requests finish for up to
    // shutdown_timeout, ends the rest (a last chunk for streams, 503 otherwise), then makes run()
    // return.
    void shutdown();

  private:
    struct State;
    using Request = std::shared_ptr<const HttpRequest>;
    using Lease = std::shared_ptr<ModelLease>;
    void preload();
    void handle(HttpRequest request, std::shared_ptr<Reply> reply);
    void answer_listing(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    // Runs fn, answering what it throws as an error in the path's API shape.
    void guarded(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                 const std::function<void()>& fn);
    // The id of the model a client named (ApiError 404 in the API's shape when none; with
    // --allow-pull, a pullable name is added to the catalogue).
    std::string model_id(std::string_view name);
    // Calls then(lease) once the named model is loaded (on this thread or the loading one);
    // errors are answered.
    void with_model(const Request& request, const std::shared_ptr<Reply>& reply,
                    std::string_view name, std::optional<std::chrono::milliseconds> keep_alive,
                    std::function<void(Lease)> then);
    // The handlers below run on a worker thread; what they throw is answered as an error.
    void handle_generation(Endpoint endpoint, const Request& request,
                           const std::shared_ptr<Reply>& reply);
    void handle_tokenizer(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_apply_template(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_count_tokens(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_messages(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_ollama_generation(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_ollama_show(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_ollama_pull(const Request& request, const std::shared_ptr<Reply>& reply);
    void handle_ollama_delete(const Request& request, const std::shared_ptr<Reply>& reply);
    ResponseContext response_context(const HttpRequest& request,
                                     const std::shared_ptr<Reply>& reply, const LoadedModel& m,
                                     std::chrono::steady_clock::time_point start);
    // The engine's work for a request to the lease's model (server/generation_path.h).
    PreparedGeneration prepare(const ModelLease& lease, GenerationRequest& request);
    // Hands a prepared job to the lease's service (ApiError 503 when it refuses), keeps the lease
    // until the job ends, and cancels the job when the client goes.
    void submit(const Lease& lease, JobSpec spec, std::shared_ptr<JobListener> job,
                const std::shared_ptr<Reply>& reply);
    void respond(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                 HttpResponse response);
    void respond_error(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                       const ApiError& e);
    bool authorized(const HttpRequest& request) const;
    void log_access(const HttpRequest& request, int status, int64_t prompt, int64_t generated,
                    std::chrono::steady_clock::time_point start) const;
    HttpHeaders cors_headers() const;

    ServerOptions options_;
    std::unique_ptr<State> state_;
};

}  // namespace minfer::server
