#pragma once
// What a request's listener needs to answer it, whatever the API: the reply, the headers the
// server adds (CORS), the metrics, the shutdown flag, the arrival time and the access log. The
// listeners (completion_job.h, messages_job.h) write their API's bodies; this writes the rest.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "server/http_server.h"
#include "server/metrics.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

struct ResponseContext {
    std::shared_ptr<Reply> reply;
    HttpHeaders headers;  // more response headers (CORS)
    Metrics* metrics = nullptr;
    const Tokenizer* tokenizer = nullptr;
    const std::atomic<bool>* shutting_down = nullptr;
    std::chrono::steady_clock::time_point arrival;
    // Called once at the end with the status sent and the token counts (the access log).
    std::function<void(int status, int64_t prompt_tokens, int64_t generated_tokens)> on_finished;

    bool shutting_down_now() const { return shutting_down != nullptr && shutting_down->load(); }
    // Starts a streamed answer of this type (server-sent events: "text/event-stream"; ollama's
    // NDJSON: "application/x-ndjson"), not cached, not buffered by nginx.
    void start_stream(const char* content_type) const;
    // A whole JSON answer (a 503 says when to retry).
    void send_json(int status, std::string body) const;
    // The request's end: counted in the metrics, written to the access log.
    void finished(int status, int64_t prompt_tokens, int64_t generated_tokens) const;
};

}  // namespace minfer::server
