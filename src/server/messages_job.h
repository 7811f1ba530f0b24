#pragma once
// One request of Anthropic's POST /v1/messages while the engine runs it: the answer as a message
// of content blocks (thinking, text, tool_use), either one JSON document at the end or a stream
// of Anthropic's events:
//   message_start, then per block content_block_start, content_block_delta (text_delta,
//   thinking_delta, input_json_delta) and content_block_stop, then message_delta (stop_reason,
//   stop_sequence, usage) and message_stop; an error after the stream started is an `error`
//   event.
// stop_reason: end_turn, max_tokens (any limit cut it short), stop_sequence (with the one that
// matched) or tool_use (the answer holds calls).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "server/answer_stream.h"
#include "server/generation_service.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/response_context.h"

namespace minfer::server {

struct MessagesSetup {
    AnswerShape shape;
    bool stream = false;
    int64_t n_prompt = 0;
    std::string id;  // "msg_..."
    std::string model;
    ResponseContext response;
};

class MessagesJob final : public JobListener {
  public:
    explicit MessagesJob(MessagesSetup setup);

    void on_token(int choice, int32_t token, const std::string& text,
                  const TokenLogprobs* logprobs) override;
    void on_choice_end(int choice, const ChoiceEnd& end) override;
    void on_failure(const std::string& what) override { failure_ = what; }
    void on_job_end(bool started) override;

  private:
    using Json = nlohmann::ordered_json;
    enum class Block { None, Thinking, Text };

    // Every block change and delta goes through here: sent as an event when streaming, and
    // applied to `content_` either way.
    void event(const char* name, Json data);
    void begin();
    void add(AnswerPiece piece);
    void open_block(Block kind);
    void close_block();
    void add_call(const chat::ToolCall& call);
    Json message(bool final) const;

    MessagesSetup s_;
    AnswerStream answer_;
    LatencyObserver latency_;
    Json content_ = Json::array();  // the message's blocks, as built so far
    Block open_ = Block::None;
    std::string pending_space_;  // white space not yet given to a text block
    int64_t n_tokens_ = 0;
    bool any_call_ = false;
    std::string stop_reason_, stop_sequence_;
    bool begun_ = false;
    bool cancelled_ = false;
    std::string failure_;  // why a forward pass of this job failed ("" when none did)
};

}  // namespace minfer::server
