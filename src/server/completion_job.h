#pragma once
// One request of /v1/chat/completions or /v1/completions while the engine runs it: turns the
// engine's events into OpenAI's response objects, either one JSON document at the end or a stream
// of server-sent events (`data: {chunk}\n\n` ... `data: [DONE]\n\n`). Also measures the time to
// first token and between tokens, and reports the request's end for the access log.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "server/answer_stream.h"
#include "server/generation_request.h"
#include "server/generation_service.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/response_context.h"
#include "tokenizer/tokenizer.h"

namespace minfer::server {

enum class Endpoint { Chat, Text };

struct CompletionSetup {
    Endpoint endpoint = Endpoint::Chat;
    GenerationRequest request;
    AnswerShape shape;
    int64_t n_prompt = 0;
    std::string id;  // "chatcmpl-..." / "cmpl-..."
    int64_t created = 0;
    std::string model;
    ResponseContext response;
};

class CompletionJob final : public JobListener {
  public:
    explicit CompletionJob(CompletionSetup setup);

    void on_token(int choice, int32_t token, const std::string& text,
                  const TokenLogprobs* logprobs) override;
    void on_choice_end(int choice, const ChoiceEnd& end) override;
    void on_failure(const std::string& what) override { failure_ = what; }
    void on_job_end(bool started) override;

  private:
    using Json = nlohmann::ordered_json;
    using Clock = std::chrono::steady_clock;

    struct Choice {
        Choice(const AnswerShape& shape, const Tokenizer& tokenizer) : answer(shape, tokenizer) {}
        AnswerStream answer;
        std::string content, reasoning;
        Json logprobs = Json::array();           // chat: content entries; text: built at the end
        std::vector<std::string> legacy_tokens;  // text endpoint's logprobs
        std::vector<float> legacy_logprobs;
        Json legacy_top = Json::array();
        int64_t n_tokens = 0;
        std::vector<chat::ToolCall> tool_calls;
        std::string finish_reason;
    };

    // Streaming: the response head and, for chat, each choice's first delta (the role); sent at
    // the first event, so that every write comes from the engine thread in order.
    void begin();
    Json head(bool chunk) const;  // id, object, created, model, system_fingerprint
    Json chunk_head() const;
    Json token_logprobs_entry(const TokenLogprobs& lp) const;
    void send_delta(int choice, const AnswerPiece& piece, const Json* logprobs);
    // A piece's completed calls: given ids, kept, and returned as stream deltas.
    Json take_calls(int choice, AnswerPiece& piece);
    void send_calls(int choice, const Json& calls);
    Json tool_call_json(const chat::ToolCall& call, std::size_t index, bool delta) const;
    void send_event(const Json& chunk);
    Json usage() const;
    Json final_response() const;
    std::string piece(int32_t token) const;

    CompletionSetup s_;
    std::vector<Choice> choices_;
    LatencyObserver latency_;
    bool begun_ = false;
    bool cancelled_ = false;
    std::string failure_;  // why a forward pass of this job failed ("" when none did)
};

// The response body bytes of a JSON value (invalid UTF-8 in token pieces becomes U+FFFD).
std::string dump_json(const nlohmann::ordered_json& value);

}  // namespace minfer::server
