#include "server/ollama_job.h"

#include <chrono>
#include <cstdio>
#include <ctime>

#include "server/api_error.h"
#include "server/completion_job.h"

namespace minfer::server {
namespace {

int64_t nanoseconds(double ms) {
    return static_cast<int64_t>(ms * 1e6);
}

}  // namespace

std::string ollama_time_now() {
    const auto now = std::chrono::system_clock::now();
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch());
    const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    std::tm utc{};
    gmtime_r(&seconds, &utc);
    char text[48];
    const auto fraction = static_cast<long>(ns.count() % 1'000'000'000);
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%09ldZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, fraction);
    return text;
}

OllamaJob::OllamaJob(OllamaSetup setup)
    : s_(std::move(setup)),
      answer_(s_.shape, *s_.response.tokenizer),
      latency_(s_.response.metrics, s_.response.arrival, 1) {}

OllamaJob::Json OllamaJob::head() const {
    return {{"model", s_.model}, {"created_at", ollama_time_now()}};
}

void OllamaJob::send_line(const Json& object) {
    if (!s_.response.reply->client_gone()) s_.response.reply->write(dump_json(object) + "\n");
}

void OllamaJob::begin() {
    if (begun_) return;
    begun_ = true;
    if (s_.stream) s_.response.start_stream("application/x-ndjson");
}

void OllamaJob::add(AnswerPiece piece) {
    Json calls = Json::array();
    for (const chat::ToolCall& call : piece.calls) {
        Json arguments = Json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
        if (!arguments.is_object()) arguments = Json::object();  // (the grammar makes it one)
        calls.push_back({{"function", {{"name", call.name}, {"arguments", std::move(arguments)}}}});
    }
    content_ += piece.content;
    thinking_ += piece.reasoning;
    for (const Json& call : calls) tool_calls_.push_back(call);
    if (!s_.stream || piece.empty()) return;
    Json line = head();
    if (s_.chat) {
        Json message = {{"role", "assistant"}, {"content", piece.content}};
        if (!piece.reasoning.empty()) message["thinking"] = piece.reasoning;
        if (!calls.empty()) message["tool_calls"] = std::move(calls);
        line["message"] = std::move(message);
    } else {
        line["response"] = piece.content;
        if (!piece.reasoning.empty()) line["thinking"] = piece.reasoning;
    }
    line["done"] = false;
    send_line(line);
}

void OllamaJob::on_token(int, int32_t token, const std::string& text, const TokenLogprobs*) {
    begin();
    if (token >= 0) {
        latency_.token(0);
        ++n_tokens_;
    }
    add(answer_.push(token, text));
}

void OllamaJob::on_choice_end(int, const ChoiceEnd& end) {
    begin();
    if (end.reason == StopReason::Cancelled) cancelled_ = true;
    add(answer_.finish());
    stats_ = end.stats;
    switch (end.reason) {
        case StopReason::EndOfGeneration:
        case StopReason::StopString:
        case StopReason::PromptDone:
            done_reason_ = "stop";
            break;
        default:
            done_reason_ = "length";  // any limit cut it short
    }
}

OllamaJob::Json OllamaJob::final_object() const {
    Json j = head();
    // Streamed, the pieces said it all: the last object's text is empty, as ollama's is.
    if (s_.chat) {
        Json message = {{"role", "assistant"}, {"content", s_.stream ? "" : content_}};
        if (!s_.stream && !thinking_.empty()) message["thinking"] = thinking_;
        if (!s_.stream && !tool_calls_.empty()) message["tool_calls"] = tool_calls_;
        j["message"] = std::move(message);
    } else {
        j["response"] = s_.stream ? "" : content_;
        if (!s_.stream && !thinking_.empty()) j["thinking"] = thinking_;
    }
    const double total_ms = std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - s_.response.arrival)
                                .count();
    j["done"] = true;
    j["done_reason"] = done_reason_;
    j["total_duration"] = nanoseconds(total_ms);
    j["load_duration"] = nanoseconds(s_.load_ms);
    j["prompt_eval_count"] = s_.n_prompt;
    j["prompt_eval_duration"] = nanoseconds(stats_.prompt_ms);
    j["eval_count"] = n_tokens_;
    j["eval_duration"] = nanoseconds(stats_.generation_ms);
    return j;
}

void OllamaJob::on_job_end(bool started) {
    if (started) begin();
    const ResponseContext& r = s_.response;
    int status = 200;
    const char* shutting_down = "the server is shutting down";
    if (r.reply->client_gone()) {
        status = 499;  // nginx's "client closed the request"
    } else if (s_.stream && begun_) {
        send_line(!failure_.empty() ? Json{{"error", failed_request_message(failure_)}}
                  : cancelled_ && r.shutting_down_now() ? Json{{"error", shutting_down}}
                                                        : final_object());
        r.reply->end();
    } else if (!failure_.empty()) {
        status = 500;
        r.send_json(status, dump_json(Json{{"error", failed_request_message(failure_)}}));
    } else if (!started || (cancelled_ && r.shutting_down_now())) {
        status = 503;
        r.send_json(status, dump_json(Json{{"error", shutting_down}}));
    } else {
        r.send_json(200, dump_json(final_object()));
    }
    r.finished(status, started ? s_.n_prompt : 0, n_tokens_);
}

}  // namespace minfer::server
