#pragma once
// One request of ollama's POST /api/chat or /api/generate while the engine runs it: streamed as
// NDJSON (one JSON object per line, ollama's default) or one JSON object at the end.
//   /api/chat:     {"model", "created_at", "message": {"role": "assistant", "content",
//                   "thinking", "tool_calls": [{"function": {"name", "arguments": {...}}}]},
//                   "done": false} per piece
//   /api/generate: {"model", "created_at", "response", "thinking", "done": false} per piece
// and a last object with "done": true, "done_reason" ("stop" or "length") and the timings in
// nanoseconds (total_duration, load_duration, prompt_eval_count, prompt_eval_duration,
// eval_count, eval_duration). An error after the stream started is a line {"error": "..."}.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/answer_stream.h"
#include "server/generation_service.h"
#include "server/metrics.h"
#include "server/response_context.h"

namespace minfer::server {

struct OllamaSetup {
    bool chat = true;  // /api/chat, else /api/generate
    AnswerShape shape;
    bool stream = true;
    int64_t n_prompt = 0;
    std::string model;
    double load_ms = 0;  // waiting for the model to load (0 when it was loaded)
    ResponseContext response;
};

class OllamaJob final : public JobListener {
  public:
    explicit OllamaJob(OllamaSetup setup);

    void on_token(int choice, int32_t token, const std::string& text,
                  const TokenLogprobs* logprobs) override;
    void on_choice_end(int choice, const ChoiceEnd& end) override;
    void on_failure(const std::string& what) override { failure_ = what; }
    void on_job_end(bool started) override;

  private:
    using Json = nlohmann::ordered_json;

    void begin();
    void add(AnswerPiece piece);
    Json head() const;  // model, created_at
    void send_line(const Json& object);
    Json final_object() const;

    OllamaSetup s_;
    AnswerStream answer_;
    LatencyObserver latency_;
    std::string content_, thinking_;
    Json tool_calls_ = Json::array();
    int64_t n_tokens_ = 0;
    std::string done_reason_ = "stop";
    SequenceStats stats_;
    bool begun_ = false;
    bool cancelled_ = false;
    std::string failure_;  // why a forward pass of this job failed ("" when none did)
};

// Now as ollama writes times: RFC 3339 in UTC with nanoseconds.
std::string ollama_time_now();

}  // namespace minfer::server
