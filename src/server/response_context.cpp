#include "server/response_context.h"

namespace minfer::server {

void ResponseContext::start_stream(const char* content_type) const {
    HttpResponse head;
    head.content_type = content_type;
    head.headers = headers;
    head.headers.emplace_back("Cache-Control", "no-cache");
    head.headers.emplace_back("X-Accel-Buffering", "no");  // nginx: do not buffer the stream
    reply->start_stream(std::move(head));
}

void ResponseContext::send_json(int status, std::string body) const {
    HttpResponse r;
    r.status = status;
    r.headers = headers;
    if (status == 503) r.headers.emplace_back("Retry-After", "1");
    r.body = std::move(body);
    reply->send(std::move(r));
}

void ResponseContext::finished(int status, int64_t prompt_tokens, int64_t generated_tokens) const {
    if (metrics != nullptr) {
        metrics->count_request(status);
        metrics->count_tokens(prompt_tokens, generated_tokens);
    }
    if (on_finished) on_finished(status, prompt_tokens, generated_tokens);
}

}  // namespace minfer::server
