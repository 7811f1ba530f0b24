#include "server/completion_job.h"

#include <algorithm>

#include "server/api_error.h"

namespace minfer::server {
namespace {

const char* finish_reason_of(StopReason r) {
    switch (r) {
        case StopReason::EndOfGeneration:
        case StopReason::StopString:
        case StopReason::PromptDone:
            return "stop";
        // Cut short: the answer may be incomplete, as after a token limit.
        case StopReason::NoAllowedToken:
        case StopReason::MaxTokens:
        case StopReason::ContextFull:
        case StopReason::CacheFull:
        case StopReason::Cancelled:  // cut short (a shutdown)
            return "length";
    }
    return "stop";
}

nlohmann::ordered_json bytes_of(const std::string& s) {
    auto a = nlohmann::ordered_json::array();
    for (const unsigned char c : s) a.push_back(c);
    return a;
}

// The legacy completions shape of an entry's alternatives: {"token": logprob, ...}.
nlohmann::ordered_json legacy_top_of(const nlohmann::ordered_json& entry) {
    auto top = nlohmann::ordered_json::object();
    for (const auto& alt : entry["top_logprobs"])
        top[alt["token"].get<std::string>()] = alt["logprob"];
    return top;
}

}  // namespace

std::string dump_json(const nlohmann::ordered_json& value) {
    return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

CompletionJob::CompletionJob(CompletionSetup setup)
    : s_(std::move(setup)), latency_(s_.response.metrics, s_.response.arrival, s_.request.n) {
    choices_.reserve(static_cast<std::size_t>(s_.request.n));
    for (int i = 0; i < s_.request.n; ++i) choices_.emplace_back(s_.shape, *s_.response.tokenizer);
}

CompletionJob::Json CompletionJob::tool_call_json(const chat::ToolCall& call, std::size_t index,
                                                  bool delta) const {
    Json j;
    if (delta) j["index"] = index;
    j["id"] = call.id;
    j["type"] = "function";
    j["function"] = {{"name", call.name}, {"arguments", call.arguments}};
    return j;
}

CompletionJob::Json CompletionJob::take_calls(int choice, AnswerPiece& piece) {
    Choice& c = choices_[static_cast<std::size_t>(choice)];
    Json calls = Json::array();
    for (chat::ToolCall& call : piece.calls) {
        call.id = chat::new_tool_call_id(*s_.shape.tool_format);
        calls.push_back(tool_call_json(call, c.tool_calls.size(), /*delta=*/true));
        c.tool_calls.push_back(std::move(call));
    }
    return calls;
}

CompletionJob::Json CompletionJob::head(bool chunk) const {
    const bool chat = s_.endpoint == Endpoint::Chat;
    Json j;
    j["id"] = s_.id;
    j["object"] = chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
    j["created"] = s_.created;
    j["model"] = s_.model;
    j["system_fingerprint"] = concat("minfer-", MINFER_VERSION);
    return j;
}

CompletionJob::Json CompletionJob::chunk_head() const {
    return head(/*chunk=*/true);
}

std::string CompletionJob::piece(int32_t token) const {
    return s_.response.tokenizer->token_to_piece(token, /*show_special=*/true);
}

CompletionJob::Json CompletionJob::token_logprobs_entry(const TokenLogprobs& lp) const {
    const std::string text = piece(lp.token);
    Json e = {{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}};
    Json top = Json::array();
    for (const auto& [id, logprob] : lp.top) {
        const std::string t = piece(id);
        top.push_back({{"token", t}, {"logprob", logprob}, {"bytes", bytes_of(t)}});
    }
    e["top_logprobs"] = std::move(top);
    return e;
}

void CompletionJob::send_event(const Json& chunk) {
    s_.response.reply->write(concat("data: ", dump_json(chunk), "\n\n"));
}

void CompletionJob::begin() {
    if (begun_ || !s_.request.stream) return;
    begun_ = true;
    s_.response.start_stream("text/event-stream");
    if (s_.endpoint != Endpoint::Chat) return;
    for (int i = 0; i < s_.request.n; ++i) {
        Json chunk = chunk_head();
        chunk["choices"] = Json::array({{{"index", i},
                                         {"delta", {{"role", "assistant"}, {"content", ""}}},
                                         {"logprobs", nullptr},
                                         {"finish_reason", nullptr}}});
        if (s_.request.include_usage) chunk["usage"] = nullptr;
        send_event(chunk);
    }
}

void CompletionJob::send_delta(int choice, const AnswerPiece& text, const Json* logprobs) {
    if (text.content.empty() && text.reasoning.empty() && logprobs == nullptr) return;
    Json c;
    c["index"] = choice;
    if (s_.endpoint == Endpoint::Chat) {
        Json delta = Json::object();
        if (!text.reasoning.empty()) delta["reasoning_content"] = text.reasoning;
        if (!text.content.empty() || text.reasoning.empty()) delta["content"] = text.content;
        c["delta"] = std::move(delta);
        c["logprobs"] = logprobs ? Json{{"content", Json::array({*logprobs})}} : Json();
    } else {
        c["text"] = text.content;
        if (logprobs) {
            c["logprobs"] = {{"tokens", {(*logprobs)["token"]}},
                             {"token_logprobs", {(*logprobs)["logprob"]}},
                             {"top_logprobs", {legacy_top_of(*logprobs)}},
                             {"text_offset",
                              {static_cast<int64_t>(
                                  choices_[static_cast<std::size_t>(choice)].content.size())}}};
        } else {
            c["logprobs"] = nullptr;
        }
    }
    c["finish_reason"] = nullptr;
    Json chunk = chunk_head();
    chunk["choices"] = Json::array({std::move(c)});
    if (s_.request.include_usage) chunk["usage"] = nullptr;
    send_event(chunk);
}

void CompletionJob::send_calls(int choice, const Json& calls) {
    if (calls.empty()) return;
    Json ch = {{"index", choice},
               {"delta", {{"tool_calls", calls}}},
               {"logprobs", nullptr},
               {"finish_reason", nullptr}};
    Json chunk = chunk_head();
    chunk["choices"] = Json::array({std::move(ch)});
    if (s_.request.include_usage) chunk["usage"] = nullptr;
    send_event(chunk);
}

void CompletionJob::on_token(int choice, int32_t token, const std::string& text,
                             const TokenLogprobs* logprobs) {
    begin();
    Choice& c = choices_[static_cast<std::size_t>(choice)];
    if (token >= 0) {
        latency_.token(choice);
        ++c.n_tokens;
    }
    std::optional<Json> entry;
    if (logprobs) entry = token_logprobs_entry(*logprobs);
    AnswerPiece split = c.answer.push(token, text);
    const Json calls = take_calls(choice, split);
    if (s_.request.stream) {
        // (The text offset of a legacy logprobs entry is where its text starts.)
        send_delta(choice, split, entry ? &*entry : nullptr);
        send_calls(choice, calls);
    }
    if (entry && s_.endpoint == Endpoint::Text) {
        c.legacy_tokens.push_back((*entry)["token"].get<std::string>());
        c.legacy_logprobs.push_back(logprobs->logprob);
        c.legacy_top.push_back(legacy_top_of(*entry));
    } else if (entry) {
        c.logprobs.push_back(std::move(*entry));
    }
    c.content += split.content;
    c.reasoning += split.reasoning;
}

void CompletionJob::on_choice_end(int choice, const ChoiceEnd& end) {
    begin();
    Choice& c = choices_[static_cast<std::size_t>(choice)];
    if (end.reason == StopReason::Cancelled) cancelled_ = true;
    AnswerPiece rest = c.answer.finish();
    const Json calls = take_calls(choice, rest);
    c.content += rest.content;
    c.reasoning += rest.reasoning;
    c.finish_reason = finish_reason_of(end.reason);
    if (!c.tool_calls.empty() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
    if (!s_.request.stream || s_.response.reply->client_gone()) return;
    send_delta(choice, rest, nullptr);
    send_calls(choice, calls);
    Json ch;
    ch["index"] = choice;
    if (s_.endpoint == Endpoint::Chat) {
        ch["delta"] = Json::object();
    } else {
        ch["text"] = "";
    }
    ch["logprobs"] = nullptr;
    ch["finish_reason"] = c.finish_reason;
    Json chunk = chunk_head();
    chunk["choices"] = Json::array({std::move(ch)});
    if (s_.request.include_usage) chunk["usage"] = nullptr;
    send_event(chunk);
}

CompletionJob::Json CompletionJob::usage() const {
    int64_t generated = 0;
    for (const Choice& c : choices_) generated += c.n_tokens;
    return {{"prompt_tokens", s_.n_prompt},
            {"completion_tokens", generated},
            {"total_tokens", s_.n_prompt + generated}};
}

CompletionJob::Json CompletionJob::final_response() const {
    Json r = head(/*chunk=*/false);
    Json choices = Json::array();
    for (std::size_t i = 0; i < choices_.size(); ++i) {
        const Choice& c = choices_[i];
        Json ch;
        ch["index"] = static_cast<int>(i);
        if (s_.endpoint == Endpoint::Chat) {
            Json message = {{"role", "assistant"}, {"content", c.content}};
            if (!c.reasoning.empty()) message["reasoning_content"] = c.reasoning;
            if (!c.tool_calls.empty()) {
                if (c.content.empty()) message["content"] = nullptr;
                Json calls = Json::array();
                for (std::size_t k = 0; k < c.tool_calls.size(); ++k)
                    calls.push_back(tool_call_json(c.tool_calls[k], k, /*delta=*/false));
                message["tool_calls"] = std::move(calls);
            }
            ch["message"] = std::move(message);
            ch["logprobs"] = s_.request.logprobs >= 0
                                 ? Json{{"content", c.logprobs}, {"refusal", nullptr}}
                                 : Json();
        } else {
            ch["text"] = c.content;
            if (s_.request.logprobs >= 0) {
                Json offsets = Json::array();
                std::size_t offset = 0;
                for (const auto& t : c.legacy_tokens) {
                    offsets.push_back(offset);
                    offset += t.size();
                }
                ch["logprobs"] = {{"tokens", c.legacy_tokens},
                                  {"token_logprobs", c.legacy_logprobs},
                                  {"top_logprobs", c.legacy_top},
                                  {"text_offset", offsets}};
            } else {
                ch["logprobs"] = nullptr;
            }
        }
        ch["finish_reason"] = c.finish_reason.empty() ? "stop" : c.finish_reason;
        choices.push_back(std::move(ch));
    }
    r["choices"] = std::move(choices);
    r["usage"] = usage();
    return r;
}

void CompletionJob::on_job_end(bool started) {
    if (started) begin();
    const ResponseContext& r = s_.response;
    const Json u = usage();
    int status = 200;
    if (r.reply->client_gone()) {
        status = 499;  // nginx's "client closed the request"
    } else if (s_.request.stream && begun_ && !failure_.empty()) {
        // The stream's status was 200; the error event says what OpenAI's clients raise.
        r.reply->write(concat("data: ", error_body(500, failed_request_message(failure_)), "\n\n"));
        r.reply->end();
    } else if (s_.request.stream && begun_) {
        if (s_.request.include_usage) {
            Json chunk = chunk_head();
            chunk["choices"] = Json::array();
            chunk["usage"] = u;
            send_event(chunk);
        }
        r.reply->write("data: [DONE]\n\n");
        r.reply->end();
    } else if (!failure_.empty()) {
        status = 500;
        r.send_json(status, error_body(status, failed_request_message(failure_)));
    } else if (!started || (cancelled_ && r.shutting_down_now())) {
        status = 503;
        r.send_json(status, error_body(status, "the server is shutting down"));
    } else {
        r.send_json(200, dump_json(final_response()));
    }
    r.finished(status, started ? s_.n_prompt : 0, u["completion_tokens"].get<int64_t>());
}

}  // namespace minfer::server
