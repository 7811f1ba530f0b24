#pragma once
// `minfer serve`: the OpenAI-compatible API (and Anthropic's Messages API) over the HTTP server,
// the generation service and the metrics. Routes:
//   POST /v1/chat/completions, POST /v1/completions   (streamed as server-sent events on request)
//   POST /v1/messages, POST /v1/messages/count_tokens (Anthropic's, with its error shape)
//   POST /api/chat, /api/generate, /api/show, GET /api/tags, /api/ps, /api/version (ollama's)
//   GET  /v1/models, GET /health, GET /metrics, POST /tokenize, POST /detokenize, GET / (chat page)
// The socket is bound at once; the model loads in the background meanwhile (/health answers 503
// until it is ready, the API 503 with Retry-After).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "runtime/loaded_model.h"
#include "server/http_server.h"

namespace minfer::server {

enum class Endpoint;
class ApiError;
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
    std::string alias;        // the model id
    std::string cors_origin;  // empty: no CORS headers
    LogFormat log_format = LogFormat::Text;
    bool access_log = true;
    HttpLimits limits;
    std::chrono::milliseconds shutdown_timeout{10'000};
    SamplingParams defaults;  // for fields a request leaves out
    bool seed_fixed = false;
    int64_t default_max_tokens = -1;  // for requests without max_tokens (-1: until the end)  //
                                      // defaults.seed applies to requests without one (else random)
};

// What the server serves: the model, its tokenizer and template, and the engine's options (the
// engine itself is made on the generation service's thread).
struct ServedModel {
    LoadedModel loaded;
    EngineOptions engine;
};

class ApiServer {
  public:
    // Binds the socket (IoError if it cannot) and starts `load` on a thread of its own. Says
    // where it listens, and when it serves, through the log sink.
    ApiServer(ServerOptions options, std::function<ServedModel()> load);
    ~ApiServer();
    ApiServer(const ApiServer&) = delete;
    ApiServer& operator=(const ApiServer&) = delete;

    int port() const;
    std::string url() const;  // http://HOST:PORT
    // Serves until shutdown() has finished; rethrows what the loader threw.
    void run();
    // Thread-safe, once: stops accepting connections, lets running requests finish for up to
    // shutdown_timeout, ends the rest (a last chunk for streams, 503 otherwise), then makes run()
    // return.
    void shutdown();

  private:
    struct State;
    void start_loading();
    void handle(HttpRequest request, std::shared_ptr<Reply> reply);
    // The handlers below run on a worker thread; what they throw is answered as an error.
    void handle_generation(Endpoint endpoint, const HttpRequest& request,
                           const std::shared_ptr<Reply>& reply);
    void handle_tokenizer(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    void handle_apply_template(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    void handle_count_tokens(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    void handle_messages(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    void handle_ollama_generation(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    void handle_ollama_show(const HttpRequest& request, const std::shared_ptr<Reply>& reply);
    ResponseContext response_context(const HttpRequest& request,
                                     const std::shared_ptr<Reply>& reply, const LoadedModel& m,
                                     std::chrono::steady_clock::time_point start);
    // Hands a prepared job to the service (ApiError 503 when it refuses) and cancels it when the
    // client goes.
    void submit(const std::shared_ptr<GenerationService>& service, JobSpec spec,
                std::shared_ptr<JobListener> job, const std::shared_ptr<Reply>& reply);
    void respond(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                 HttpResponse response);
    void respond_error(const HttpRequest& request, const std::shared_ptr<Reply>& reply,
                       const ApiError& e);
    bool authorized(const HttpRequest& request) const;
    void log_access(const HttpRequest& request, int status, int64_t prompt, int64_t generated,
                    std::chrono::steady_clock::time_point start) const;
    HttpHeaders cors_headers() const;

    ServerOptions options_;
    std::function<ServedModel()> load_;
    std::unique_ptr<State> state_;
};

}  // namespace minfer::server
