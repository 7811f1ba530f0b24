#pragma once
// The engine behind the server: one thread owns the Engine and steps it while anything runs.
// Requests (jobs) arrive from any thread; they wait in a queue in arrival order (at most
// max_queue of them: beyond, submit() says no and the client gets 503) and are admitted while the
// sequences running stay within n_parallel. A job of n choices forks after its prompt: the first
// choice evaluates the prompt, the others start once it has (and take its blocks from the prefix
// cache). Cancelling a job (its client went away) ends its sequences at the next step, freeing
// their KV blocks. Everything a job is told, it is told on the engine thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "engine/engine.h"

namespace minfer::server {

// The log-probabilities of one generated token: its own and the `top` most likely at its place.
struct TokenLogprobs {
    int32_t token = -1;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // best first
};

struct JobSpec {
    // What every choice's sequence is given (choice i draws with sampling.seed + i); on_logits,
    // continue_from and keep are the service's.
    SequenceParams sequence;
    int n = 1;
    int top_logprobs = -1;  // -1: no log-probabilities
};

// How a choice ended.
struct ChoiceEnd {
    StopReason reason = StopReason::MaxTokens;
    std::string stop_string;  // the one that ended it, when reason is StopString
    SequenceStats stats;
};

// What a job hears; every call on the engine thread.
class JobListener {
  public:
    virtual ~JobListener() = default;
    // A token of choice `choice` (token -1: only text, flushed at the end), its text (may be
    // empty: part of a character), its log-probabilities when asked for.
    virtual void on_token(int choice, int32_t token, const std::string& text,
                          const TokenLogprobs* logprobs) = 0;
    virtual void on_choice_end(int choice, const ChoiceEnd& end) = 0;
    // A forward pass running the job's sequences failed (out of device memory, a lost device):
    // `what` says why. Its unfinished choices then end as cancelled, and the job should answer
    // with an error, not with what it had.
    virtual void on_failure(const std::string& what) = 0;
    // Every choice ended (or the job was cancelled before it started: `started` false).
    virtual void on_job_end(bool started) = 0;
};

using JobId = uint64_t;

struct ServiceOptions {
    int n_parallel = 4;  // sequences decoded at once
    int max_queue = 64;  // jobs waiting beyond those
};

struct ServiceCounters {
    int64_t running_sequences = 0;
    int64_t queued_jobs = 0;
    int64_t kv_blocks_used = 0;
    int64_t kv_blocks_total = 0;
    int64_t prefix_hit_tokens = 0;
};

class GenerationService {
  public:
    // The engine is made on the service's own thread, which then steps it: the engine's thread
    // pool pins the thread that makes it as its thread 0, which must be the one calling step().
    // Rethrows what make_engine throws.
    GenerationService(const std::function<std::unique_ptr<Engine>()>& make_engine,
                      ServiceOptions options);
    ~GenerationService();  // cancels what runs and joins the thread
    GenerationService(const GenerationService&) = delete;
    GenerationService& operator=(const GenerationService&) = delete;

    enum class Refusal { QueueFull, ShuttingDown };
    // Thread-safe. The job's id, or why it was not taken.
    std::variant<JobId, Refusal> submit(JobSpec spec, std::shared_ptr<JobListener> listener);
    // Thread-safe; a job that ended already is ignored.
    void cancel(JobId id);
    // Thread-safe: takes no more jobs; lets the others finish for up to `grace`, then cancels
    // them; returns when every job has ended.
    void shutdown(std::chrono::milliseconds grace);

    ServiceCounters counters() const;
    // The context of one sequence (fixed once the engine is made; read from any thread).
    int64_t n_ctx() const { return n_ctx_; }

  private:
    struct Job;
    void loop(const std::function<std::unique_ptr<Engine>()>& make_engine,
              std::promise<void>& made);
    void take_requests();
    void admit();
    void start_choice(Job& job, int choice);
    void dispatch(const std::vector<SequenceEvent>& events);
    void end_job_if_done(JobId id);
    void job_gone(bool was_queued);  // a job ended: counts, and wakes shutdown()
    void publish_counters();
    void recover_from_failed_step(const std::string& what);

    std::unique_ptr<Engine> engine_;  // made and destroyed on thread_
    int64_t n_ctx_ = 0;
    ServiceOptions options_;

    mutable std::mutex mutex_;  // guards the members up to `thread_`
    std::condition_variable wake_;
    std::deque<std::unique_ptr<Job>> incoming_;
    std::vector<JobId> cancels_;
    bool draining_ = false;
    bool cancel_all_ = false;  // once: at the end of shutdown's grace, or after a failed step
    bool stop_ = false;
    std::size_t queued_ = 0;  // incoming_ + waiting_, for the limit
    JobId next_id_ = 1;

    // Engine thread only.
    std::deque<std::unique_ptr<Job>> waiting_;
    std::unordered_map<JobId, std::unique_ptr<Job>> running_;
    std::unordered_map<SeqId, std::pair<JobId, int>> by_sequence_;
    int running_sequences_ = 0;

    std::atomic<int64_t> c_running_{0}, c_queued_{0}, c_kv_used_{0}, c_kv_total_{0},
        c_prefix_hits_{0};
    std::atomic<int> jobs_alive_{0};
    std::condition_variable all_ended_;
    std::thread thread_;
};

}  // namespace minfer::server
