// The generation service under the server: admission within n_parallel in arrival order, the
// queue limit, cancellation of queued and running jobs, preemption when the KV pool is too small
// for everyone, several choices sharing a prompt, shutdown.

#include "server/generation_service.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>

#include "backend/backend.h"
#include "common/engine_helpers.h"
#include "common/fixtures.h"

namespace minfer::server {
namespace {

constexpr const char* kModel = "models/tiny-llama-q4_0.gguf";

// Records what a job hears.
class Recorder final : public JobListener {
  public:
    void on_token(int choice, int32_t token, const std::string& text,
                  const TokenLogprobs* lp) override {
        std::lock_guard lock(mutex_);
        if (token >= 0) tokens_[choice].push_back(token);
        text_[choice] += text;
        if (lp != nullptr) logprobs_.push_back(*lp);
    }
    void on_choice_end(int choice, const ChoiceEnd& end) override {
        std::lock_guard lock(mutex_);
        stops_[choice] = end.reason;
        reused_[choice] = end.stats.n_reused;
    }
    void on_failure(const std::string& what) override {
        std::lock_guard lock(mutex_);
        failure_ = what;
    }
    void on_job_end(bool started) override {
        std::lock_guard lock(mutex_);
        ended_ = true;
        started_ = started;
        done_.notify_all();
    }
    bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
        std::unique_lock lock(mutex_);
        return done_.wait_for(lock, timeout, [&] { return ended_; });
    }
    std::vector<int32_t> tokens(int choice = 0) {
        std::lock_guard lock(mutex_);
        return tokens_[choice];
    }
    StopReason stop(int choice = 0) {
        std::lock_guard lock(mutex_);
        return stops_.at(choice);
    }
    int64_t reused(int choice) {
        std::lock_guard lock(mutex_);
        return reused_.at(choice);
    }
    bool started() {
        std::lock_guard lock(mutex_);
        return started_;
    }
    std::string failure() {
        std::lock_guard lock(mutex_);
        return failure_;
    }
    std::size_t n_tokens_now() {
        std::lock_guard lock(mutex_);
        return tokens_[0].size();
    }
    std::vector<TokenLogprobs> logprobs() {
        std::lock_guard lock(mutex_);
        return logprobs_;
    }

  private:
    std::mutex mutex_;
    std::condition_variable done_;
    std::map<int, std::vector<int32_t>> tokens_;
    std::map<int, std::string> text_;
    std::map<int, StopReason> stops_;
    std::map<int, int64_t> reused_;
    std::vector<TokenLogprobs> logprobs_;
    std::string failure_;
    bool ended_ = false, started_ = false;
};

std::vector<int32_t> random_prompt(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> id(3, 500);
    std::vector<int32_t> t(n);
    for (auto& x : t) x = id(rng);
    return t;
}

JobSpec greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
    JobSpec s;
    s.sequence.prompt = std::move(prompt);
    s.sequence.sampling.temperature = 0.0f;
    s.sequence.n_predict = max_tokens;
    s.sequence.ignore_eog = true;
    return s;
}

// Makes the engine (on the service's thread).
std::function<std::unique_ptr<Engine>()> engine_for(const std::filesystem::path& model,
                                                    int64_t kv_tokens, int64_t n_ctx = 256) {
    return [=] {
        EngineOptions o;
        o.n_threads = 2;
        o.n_ctx = n_ctx;
        o.kv_tokens = kv_tokens;
        return test::make_engine(model, o).engine;
    };
}

// The tokens a prompt gets alone.
std::vector<int32_t> alone(const std::filesystem::path& model, const JobSpec& spec) {
    GenerationService service(engine_for(model, 1024), {1, 8});
    auto r = std::make_shared<Recorder>();
    EXPECT_TRUE(std::holds_alternative<JobId>(service.submit(spec, r)));
    EXPECT_TRUE(r->wait());
    return r->tokens();
}

TEST(GenerationService, AdmitsWithinNParallelAndEveryJobGetsItsAloneAnswer) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    GenerationService service(engine_for(model, 2048), {2, 16});
    std::vector<std::shared_ptr<Recorder>> jobs;
    std::vector<JobSpec> specs;
    for (unsigned i = 0; i < 5; ++i) {
        specs.push_back(greedy(random_prompt(10 + i, i), 12));
        jobs.push_back(std::make_shared<Recorder>());
        ASSERT_TRUE(std::holds_alternative<JobId>(service.submit(specs.back(), jobs.back())));
    }
    int64_t most_running = 0;
    while (!jobs.back()->wait(std::chrono::milliseconds(1)))
        most_running = std::max(most_running, service.counters().running_sequences);
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        ASSERT_TRUE(jobs[i]->wait());
        EXPECT_EQ(jobs[i]->stop(), StopReason::MaxTokens);
        EXPECT_EQ(jobs[i]->tokens(), alone(model, specs[i])) << "job " << i;
    }
    EXPECT_LE(most_running, 2);
    EXPECT_EQ(service.counters().running_sequences, 0);
    EXPECT_EQ(service.counters().queued_jobs, 0);
}

TEST(GenerationService, RefusesAJobBeyondTheQueueLimit) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    GenerationService service(engine_for(model, 4096, 4096), {1, 1});
    auto running = std::make_shared<Recorder>();
    ASSERT_TRUE(
        std::holds_alternative<JobId>(service.submit(greedy(random_prompt(8, 1), 3000), running)));
    // Wait until it runs (the counters lag by a step).
    while (service.counters().running_sequences == 0) std::this_thread::yield();
    auto queued = std::make_shared<Recorder>();
    const auto q = service.submit(greedy(random_prompt(8, 2), 2), queued);
    ASSERT_TRUE(std::holds_alternative<JobId>(q));
    const auto refused =
        service.submit(greedy(random_prompt(8, 3), 2), std::make_shared<Recorder>());
    ASSERT_TRUE(std::holds_alternative<GenerationService::Refusal>(refused));
    EXPECT_EQ(std::get<GenerationService::Refusal>(refused), GenerationService::Refusal::QueueFull);
    // A queued job cancelled never starts.
    service.cancel(std::get<JobId>(q));
    ASSERT_TRUE(queued->wait());
    EXPECT_FALSE(queued->started());
    EXPECT_TRUE(queued->tokens().empty());
}

TEST(GenerationService, CancellingARunningJobEndsItAndFreesItsBlocks) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    GenerationService service(engine_for(model, 4096, 4096), {4, 4});
    auto r = std::make_shared<Recorder>();
    const auto id = service.submit(greedy(random_prompt(40, 5), 3000), r);
    ASSERT_TRUE(std::holds_alternative<JobId>(id));
    while (r->n_tokens_now() < 5) std::this_thread::yield();
    EXPECT_GT(service.counters().kv_blocks_used, 0);
    service.cancel(std::get<JobId>(id));
    ASSERT_TRUE(r->wait());
    EXPECT_TRUE(r->started());
    EXPECT_EQ(r->stop(), StopReason::Cancelled);
    EXPECT_LT(r->tokens().size(), 3000u);
    while (service.counters().running_sequences != 0) std::this_thread::yield();
    EXPECT_EQ(service.counters().kv_blocks_used, 0);  // (cached blocks are idle, not used)
}

// A pool of 64 positions for three sequences of 20 + 20: they cannot all fit; the youngest are
// preempted and recomputed, and each still gets its alone answer.
TEST(GenerationService, PreemptionUnderAFullPoolKeepsEveryAnswer) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    GenerationService service(engine_for(model, 64, 64), {3, 8});
    std::vector<std::shared_ptr<Recorder>> jobs;
    std::vector<JobSpec> specs;
    for (unsigned i = 0; i < 3; ++i) {
        specs.push_back(greedy(random_prompt(20, 40 + i), 20));
        jobs.push_back(std::make_shared<Recorder>());
        ASSERT_TRUE(std::holds_alternative<JobId>(service.submit(specs.back(), jobs.back())));
    }
    for (std::size_t i = 0; i < jobs.size(); ++i) {
        ASSERT_TRUE(jobs[i]->wait());
        EXPECT_EQ(jobs[i]->stop(), StopReason::MaxTokens);
        EXPECT_EQ(jobs[i]->tokens(), alone(model, specs[i])) << "job " << i;
    }
}

TEST(GenerationService, ChoicesForkAfterThePromptAndShareItsBlocks) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    GenerationService service(engine_for(model, 2048), {4, 8});
    JobSpec spec = greedy(random_prompt(50, 9), 6);
    spec.n = 3;
    spec.top_logprobs = 2;
    auto r = std::make_shared<Recorder>();
    ASSERT_TRUE(std::holds_alternative<JobId>(service.submit(spec, r)));
    ASSERT_TRUE(r->wait());
    EXPECT_EQ(r->tokens(0), r->tokens(1));  // greedy: the same answer
    EXPECT_EQ(r->tokens(0), r->tokens(2));
    EXPECT_EQ(r->reused(0), 0);
    EXPECT_EQ(r->reused(1), 48);  // the prompt's whole blocks, from the prefix cache
    EXPECT_EQ(r->reused(2), 48);
    const auto lps = r->logprobs();
    ASSERT_EQ(lps.size(), 18u);
    for (const auto& lp : lps) {
        ASSERT_EQ(lp.top.size(), 2u);
        EXPECT_EQ(lp.top[0].first, lp.token);  // greedy
        EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
        EXPECT_GE(lp.top[0].second, lp.top[1].second);
        EXPECT_LE(lp.logprob, 0.0f);
    }
}

// A CPU backend whose execute() throws once, at the n-th call.
class FailingOnce final : public Backend {
  public:
    FailingOnce(std::unique_ptr<Backend> inner, int fail_at)
        : inner_(std::move(inner)), fail_at_(fail_at) {}
    std::string_view name() const override { return "failing-once"; }
    void execute(const Graph& g) override {
        if (++calls_ == fail_at_) throw std::runtime_error("injected failure");
        inner_->execute(g);
    }
    std::span<const float> logits() const override { return inner_->logits(); }
    void copy_kv_block(int32_t from, int32_t to, int64_t n) override {
        inner_->copy_kv_block(from, to, n);
    }
    std::size_t kv_cache_bytes() const override { return inner_->kv_cache_bytes(); }
    std::size_t scratch_bytes() const override { return inner_->scratch_bytes(); }

  private:
    std::unique_ptr<Backend> inner_;
    int fail_at_;
    int calls_ = 0;
};

// A step that throws (out of device memory, a bug) ends the running jobs instead of hanging them,
// each unfinished one told why, and the service goes on serving.
TEST(GenerationService, AFailedStepEndsTheRunningJobsAndServingGoesOn) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    GenerationService service(
        [&] {
            EngineOptions o;
            o.n_threads = 2;
            o.n_ctx = 256;
            o.kv_tokens = 1024;
            o.make_backend = [](const BackendOptions& b,
                                ThreadPool& pool) -> std::unique_ptr<Backend> {
                return std::make_unique<FailingOnce>(make_cpu_backend(b, pool), 6);
            };
            return test::make_engine(model, o).engine;
        },
        {4, 8});
    // One job ends by its token limit in the failing step's batch, the other runs on.
    auto short_job = std::make_shared<Recorder>();
    auto long_job = std::make_shared<Recorder>();
    ASSERT_TRUE(
        std::holds_alternative<JobId>(service.submit(greedy(random_prompt(8, 1), 4), short_job)));
    ASSERT_TRUE(
        std::holds_alternative<JobId>(service.submit(greedy(random_prompt(8, 2), 200), long_job)));
    ASSERT_TRUE(short_job->wait(std::chrono::seconds(10)));
    ASSERT_TRUE(long_job->wait(std::chrono::seconds(10)));
    EXPECT_EQ(long_job->stop(), StopReason::Cancelled);
    EXPECT_EQ(long_job->failure(), "injected failure");
    EXPECT_EQ(short_job->failure(), "");
    auto after = std::make_shared<Recorder>();
    ASSERT_TRUE(
        std::holds_alternative<JobId>(service.submit(greedy(random_prompt(8, 3), 3), after)));
    ASSERT_TRUE(after->wait(std::chrono::seconds(10)));
    EXPECT_EQ(after->stop(), StopReason::MaxTokens);
    EXPECT_EQ(after->failure(), "");
    // (The counters are published after each step.)
    for (int i = 0; i < 1000 && service.counters().running_sequences != 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_EQ(service.counters().running_sequences, 0);
}

TEST(GenerationService, ShutdownEndsRunningJobsAfterTheGraceAndRefusesNewOnes) {
    MINFER_REQUIRE_FIXTURE(model, kModel);
    auto service =
        std::make_unique<GenerationService>(engine_for(model, 4096, 4096), ServiceOptions{2, 8});
    auto r = std::make_shared<Recorder>();
    ASSERT_TRUE(
        std::holds_alternative<JobId>(service->submit(greedy(random_prompt(8, 7), 4000), r)));
    while (r->n_tokens_now() < 2) std::this_thread::yield();
    std::thread later([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const auto refused =
            service->submit(greedy(random_prompt(8, 8), 2), std::make_shared<Recorder>());
        EXPECT_TRUE(std::holds_alternative<GenerationService::Refusal>(refused));
    });
    service->shutdown(std::chrono::milliseconds(200));
    later.join();
    EXPECT_TRUE(r->wait(std::chrono::milliseconds(0)));
    EXPECT_EQ(r->stop(), StopReason::Cancelled);
}

}  // namespace
}  // namespace minfer::server
