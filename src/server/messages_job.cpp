#include "server/messages_job.h"

#include <random>

#include "server/api_error.h"
#include "server/completion_job.h"

namespace minfer::server {
namespace {

const char* stop_reason_of(StopReason r) {
    switch (r) {
        case StopReason::EndOfGeneration:
        case StopReason::PromptDone:
            return "end_turn";
        case StopReason::StopString:
            return "stop_sequence";
        // Cut short: the answer may be incomplete, as after the token limit.
        case StopReason::NoAllowedToken:
        case StopReason::MaxTokens:
        case StopReason::ContextFull:
        case StopReason::CacheFull:
        case StopReason::Cancelled:
            return "max_tokens";
    }
    return "end_turn";
}

bool only_space(const std::string& s) {
    return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

// Anthropic's tool_use ids: "toolu_" and 24 letters and digits.
std::string new_tool_use_id() {
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    std::string id = "toolu_";
    for (int i = 0; i < 24; ++i) id += kAlphabet[rng() % (sizeof kAlphabet - 1)];
    return id;
}

}  // namespace

MessagesJob::MessagesJob(MessagesSetup setup)
    : s_(std::move(setup)),
      answer_(s_.shape, *s_.response.tokenizer),
      latency_(s_.response.metrics, s_.response.arrival, 1) {}

void MessagesJob::event(const char* name, Json data) {
    if (s_.stream && !s_.response.reply->client_gone())
        s_.response.reply->write(concat("event: ", name, "\ndata: ", dump_json(data), "\n\n"));
    const std::string type = data["type"].get<std::string>();
    if (type == "content_block_start") {
        content_.push_back(std::move(data["content_block"]));
    } else if (type == "content_block_delta") {
        Json& block = content_.back();
        const Json& delta = data["delta"];
        if (delta["type"] == "text_delta") {
            block["text"].get_ref<std::string&>() += delta["text"].get_ref<const std::string&>();
        } else if (delta["type"] == "thinking_delta") {
            block["thinking"].get_ref<std::string&>() +=
                delta["thinking"].get_ref<const std::string&>();
        } else if (delta["type"] == "input_json_delta") {
            // One delta holds a call's whole arguments, a JSON object (the grammar makes it one).
            Json input = Json::parse(delta["partial_json"].get<std::string>(), nullptr,
                                     /*allow_exceptions=*/false);
            block["input"] = input.is_object() ? std::move(input) : Json::object();
        }
    }
}

MessagesJob::Json MessagesJob::message(bool final) const {
    Json m = {{"id", s_.id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", s_.model},
              {"content", final ? content_ : Json::array()},
              {"stop_reason", final ? Json(stop_reason_) : Json()},
              {"stop_sequence", stop_sequence_.empty() ? Json() : Json(stop_sequence_)},
              {"usage", {{"input_tokens", s_.n_prompt}, {"output_tokens", final ? n_tokens_ : 0}}}};
    return m;
}

void MessagesJob::begin() {
    if (begun_) return;
    begun_ = true;
    if (!s_.stream) return;
    s_.response.start_stream("text/event-stream");
    event("message_start", {{"type", "message_start"}, {"message", message(false)}});
}

void MessagesJob::open_block(Block kind) {
    if (open_ == kind) return;
    close_block();
    const int index = static_cast<int>(content_.size());
    Json block = kind == Block::Text
                     ? Json{{"type", "text"}, {"text", ""}}
                     : Json{{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
    event("content_block_start",
          {{"type", "content_block_start"}, {"index", index}, {"content_block", std::move(block)}});
    open_ = kind;
}

void MessagesJob::close_block() {
    if (open_ == Block::None) return;
    event("content_block_stop",
          {{"type", "content_block_stop"}, {"index", static_cast<int>(content_.size()) - 1}});
    open_ = Block::None;
}

void MessagesJob::add_call(const chat::ToolCall& call) {
    close_block();
    pending_space_.clear();  // white space between calls is not text
    const int index = static_cast<int>(content_.size());
    // As Anthropic streams it: the block starts with an empty input, a delta carries its JSON.
    event("content_block_start", {{"type", "content_block_start"},
                                  {"index", index},
                                  {"content_block",
                                   {{"type", "tool_use"},
                                    {"id", new_tool_use_id()},
                                    {"name", call.name},
                                    {"input", Json::object()}}}});
    event("content_block_delta",
          {{"type", "content_block_delta"},
           {"index", index},
           {"delta", {{"type", "input_json_delta"}, {"partial_json", call.arguments}}}});
    event("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
    any_call_ = true;
}

void MessagesJob::add(AnswerPiece piece) {
    const auto delta = [&](const char* type, const char* field, const std::string& text) {
        event("content_block_delta", {{"type", "content_block_delta"},
                                      {"index", static_cast<int>(content_.size()) - 1},
                                      {"delta", {{"type", type}, {field, text}}}});
    };
    if (!piece.reasoning.empty()) {
        open_block(Block::Thinking);
        delta("thinking_delta", "thinking", piece.reasoning);
    }
    if (!piece.content.empty()) {
        // White space before any text (after reasoning, between calls) opens no text block.
        if (open_ != Block::Text && only_space(pending_space_ + piece.content)) {
            pending_space_ += piece.content;
        } else {
            open_block(Block::Text);
            delta("text_delta", "text", pending_space_ + piece.content);
            pending_space_.clear();
        }
    }
    for (const chat::ToolCall& call : piece.calls) add_call(call);
}

void MessagesJob::on_token(int, int32_t token, const std::string& text, const TokenLogprobs*) {
    begin();
    if (token >= 0) {
        latency_.token(0);
        ++n_tokens_;
    }
    add(answer_.push(token, text));
}

void MessagesJob::on_choice_end(int, const ChoiceEnd& end) {
    begin();
    if (end.reason == StopReason::Cancelled) cancelled_ = true;
    add(answer_.finish());
    close_block();
    stop_reason_ = stop_reason_of(end.reason);
    if (end.reason == StopReason::StopString) stop_sequence_ = end.stop_string;
    if (any_call_ && stop_reason_ == "end_turn") stop_reason_ = "tool_use";
}

void MessagesJob::on_job_end(bool started) {
    if (started) begin();
    const ResponseContext& r = s_.response;
    int status = 200;
    if (r.reply->client_gone()) {
        status = 499;  // nginx's "client closed the request"
    } else if (s_.stream && begun_) {
        if (!failure_.empty()) {
            event("error", anthropic_error(500, failed_request_message(failure_)));
        } else if (cancelled_ && r.shutting_down_now()) {
            event("error", anthropic_error(503, "the server is shutting down"));
        } else {
            event("message_delta",
                  {{"type", "message_delta"},
                   {"delta",
                    {{"stop_reason", stop_reason_},
                     {"stop_sequence", stop_sequence_.empty() ? Json() : Json(stop_sequence_)}}},
                   {"usage", {{"output_tokens", n_tokens_}}}});
            event("message_stop", {{"type", "message_stop"}});
        }
        r.reply->end();
    } else if (!failure_.empty()) {
        status = 500;
        r.send_json(status, anthropic_error_body(status, failed_request_message(failure_)));
    } else if (!started || (cancelled_ && r.shutting_down_now())) {
        status = 503;
        r.send_json(status, anthropic_error_body(status, "the server is shutting down"));
    } else {
        r.send_json(200, dump_json(message(/*final=*/true)));
    }
    r.finished(status, started ? s_.n_prompt : 0, n_tokens_);
}

}  // namespace minfer::server
