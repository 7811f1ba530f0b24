#include "server/generation_service.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "kernels/ops.h"

namespace minfer::server {

struct GenerationService::Job {
    JobId id = 0;
    JobSpec spec;
    std::shared_ptr<JobListener> listener;
    std::vector<std::optional<SeqId>> sequences;  // per choice, once started
    std::vector<bool> ended;                      // per choice
    int n_ended = 0;
    bool prompt_done = false;  // choice 0 sampled its first token: the others may start
    bool cancelled = false;
    // Log-probabilities: the last logits row of each choice and its log-sum-exp.
    std::vector<std::vector<float>> rows;
    std::vector<double> logsumexp;
};

namespace {

TokenLogprobs logprobs_of(int32_t token, const std::vector<float>& row, double lse, int n_top) {
    TokenLogprobs lp;
    lp.token = token;
    lp.logprob = static_cast<float>(row[static_cast<std::size_t>(token)] - lse);
    // The n_top largest logits (lower id first among equals) in one pass: a small heap whose
    // front is the worst kept, so almost every logit costs one comparison.
    const auto n = std::min<std::size_t>(static_cast<std::size_t>(std::max(0, n_top)), row.size());
    if (n == 0) return lp;
    std::vector<std::pair<float, int32_t>> heap;  // (logit, id)
    heap.reserve(n + 1);
    const auto worse = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    for (std::size_t i = 0; i < row.size(); ++i) {
        if (heap.size() == n && !(row[i] > heap.front().first)) continue;
        heap.emplace_back(row[i], static_cast<int32_t>(i));
        std::push_heap(heap.begin(), heap.end(), worse);
        if (heap.size() > n) {
            std::pop_heap(heap.begin(), heap.end(), worse);
            heap.pop_back();
        }
    }
    std::sort(heap.begin(), heap.end(), worse);
    for (const auto& [logit, id] : heap) lp.top.emplace_back(id, static_cast<float>(logit - lse));
    return lp;
}

}  // namespace

GenerationService::GenerationService(const std::function<std::unique_ptr<Engine>()>& make_engine,
                                     ServiceOptions options)
    : options_(options) {
    if (options_.n_parallel < 1)
        throw UsageError("the server needs at least one parallel sequence");
    if (options_.max_queue < 0) throw UsageError("the queue limit must be 0 or more");
    std::promise<void> made;
    auto ready = made.get_future();
    thread_ = std::thread([this, &make_engine, &made] { loop(make_engine, made); });
    try {
        ready.get();
    } catch (...) {
        thread_.join();
        throw;
    }
}

GenerationService::~GenerationService() {
    shutdown(std::chrono::milliseconds(0));
}

std::variant<JobId, GenerationService::Refusal> GenerationService::submit(
    JobSpec spec, std::shared_ptr<JobListener> listener) {
    auto job = std::make_unique<Job>();
    job->spec = std::move(spec);
    job->listener = std::move(listener);
    const auto n = static_cast<std::size_t>(std::max(1, job->spec.n));
    job->sequences.resize(n);
    job->ended.assign(n, false);
    job->rows.resize(n);
    job->logsumexp.assign(n, 0);
    std::lock_guard lock(mutex_);
    if (draining_) return Refusal::ShuttingDown;
    // The queue holds what waits beyond the sequences that can run now: a job is refused when
    // max_queue others would be waiting before it. (The counts are read from the engine thread's
    // last update, so they may lag by a step.)
    const auto free_slots =
        static_cast<std::size_t>(std::max<int64_t>(0, options_.n_parallel - c_running_.load()));
    if (queued_ >= static_cast<std::size_t>(options_.max_queue) + free_slots)
        return Refusal::QueueFull;
    job->id = next_id_++;
    const JobId id = job->id;
    incoming_.push_back(std::move(job));
    ++queued_;
    ++jobs_alive_;
    c_queued_ = static_cast<int64_t>(queued_);
    wake_.notify_one();
    return id;
}

void GenerationService::cancel(JobId id) {
    std::lock_guard lock(mutex_);
    cancels_.push_back(id);
    wake_.notify_one();
}

void GenerationService::shutdown(std::chrono::milliseconds grace) {
    std::unique_lock lock(mutex_);
    draining_ = true;
    if (!all_ended_.wait_for(lock, grace, [&] { return jobs_alive_ == 0; })) {
        cancel_all_ = true;
        wake_.notify_one();
        // Cancelled sequences end at the next step; never wait forever on a bug.
        if (!all_ended_.wait_for(lock, std::chrono::seconds(30), [&] { return jobs_alive_ == 0; }))
            log_warning(concat("server: ", jobs_alive_.load(), " requests did not end; stopping"));
    }
    stop_ = true;
    wake_.notify_one();
    lock.unlock();
    if (thread_.joinable()) thread_.join();
}

ServiceCounters GenerationService::counters() const {
    ServiceCounters c;
    c.running_sequences = c_running_.load();
    c.queued_jobs = c_queued_.load();
    c.kv_blocks_used = c_kv_used_.load();
    c.kv_blocks_total = c_kv_total_.load();
    c.prefix_hit_tokens = c_prefix_hits_.load();
    return c;
}

void GenerationService::publish_counters() {
    const BlockPool& pool = engine_->kv().pool();
    c_running_ = running_sequences_;
    c_kv_total_ = pool.n_blocks();
    c_kv_used_ = pool.n_blocks() - pool.n_available();
    c_prefix_hits_ = engine_->kv().prefix_hits();
}

// Moves new jobs to the waiting queue and applies cancellations.
void GenerationService::take_requests() {
    std::vector<JobId> cancels;
    bool cancel_all = false;
    {
        std::lock_guard lock(mutex_);
        while (!incoming_.empty()) {
            waiting_.push_back(std::move(incoming_.front()));
            incoming_.pop_front();
        }
        cancels.swap(cancels_);
        cancel_all = std::exchange(cancel_all_, false);
    }
    if (cancel_all) {
        for (const auto& j : waiting_) cancels.push_back(j->id);
        for (const auto& [id, j] : running_) cancels.push_back(id);
    }
    for (const JobId id : cancels) {
        const auto w = std::find_if(waiting_.begin(), waiting_.end(),
                                    [&](const auto& j) { return j->id == id; });
        if (w != waiting_.end()) {
            const auto listener = (*w)->listener;
            waiting_.erase(w);
            listener->on_job_end(false);
            job_gone(true);
            continue;
        }
        const auto r = running_.find(id);
        if (r == running_.end() || r->second->cancelled) continue;
        Job& job = *r->second;
        job.cancelled = true;
        for (std::size_t c = 0; c < job.sequences.size(); ++c) {
            if (job.sequences[c]) {
                if (!job.ended[c]) engine_->cancel(*job.sequences[c]);
            } else if (!job.ended[c]) {
                // Never started: it ends now.
                job.ended[c] = true;
                ++job.n_ended;
                --running_sequences_;
                job.listener->on_choice_end(static_cast<int>(c),
                                            ChoiceEnd{StopReason::Cancelled, {}, {}});
            }
        }
        end_job_if_done(id);
    }
}

void GenerationService::job_gone(bool was_queued) {
    std::lock_guard lock(mutex_);
    if (was_queued) --queued_;
    c_queued_ = static_cast<int64_t>(queued_);
    if (--jobs_alive_ == 0) all_ended_.notify_all();
}

// Admits waiting jobs in arrival order while their sequences fit within n_parallel (a job of
// more choices than n_parallel runs alone).
void GenerationService::admit() {
    while (!waiting_.empty()) {
        Job& next = *waiting_.front();
        const int n = static_cast<int>(next.sequences.size());
        if (running_sequences_ > 0 && running_sequences_ + n > options_.n_parallel) break;
        std::unique_ptr<Job> job = std::move(waiting_.front());
        waiting_.pop_front();
        {
            std::lock_guard lock(mutex_);
            --queued_;
            c_queued_ = static_cast<int64_t>(queued_);
        }
        running_sequences_ += n;
        const JobId id = job->id;
        Job& j = *job;
        running_.emplace(id, std::move(job));
        start_choice(j, 0);
    }
}

void GenerationService::start_choice(Job& job, int choice) {
    const auto c = static_cast<std::size_t>(choice);
    SequenceParams p = job.spec.sequence;
    p.sampling.seed += static_cast<uint64_t>(choice);
    if (job.spec.top_logprobs >= 0) {
        Job* j = &job;
        p.on_logits = [j, c](int64_t, std::span<const float> row) {
            j->rows[c].assign(row.begin(), row.end());
            j->logsumexp[c] = minfer::logsumexp(row.data(), static_cast<int64_t>(row.size()));
        };
    }
    try {
        const SeqId seq = engine_->submit(std::move(p));
        job.sequences[c] = seq;
        by_sequence_[seq] = {job.id, choice};
    } catch (const Error& e) {
        // The front end checked the prompt against the context and the vocabulary already.
        log_warning(concat("server: a sequence could not start: ", e.what()));
        // The first choice failing means the others never start.
        for (std::size_t k = choice == 0 ? 0 : c; k < (choice == 0 ? job.ended.size() : c + 1);
             ++k) {
            if (job.ended[k]) continue;
            job.ended[k] = true;
            ++job.n_ended;
            --running_sequences_;
            job.listener->on_choice_end(static_cast<int>(k),
                                        ChoiceEnd{StopReason::Cancelled, {}, {}});
        }
        end_job_if_done(job.id);
    }
}

void GenerationService::dispatch(const std::vector<SequenceEvent>& events) {
    for (const SequenceEvent& e : events) {
        const auto it = by_sequence_.find(e.id);
        if (it == by_sequence_.end()) continue;
        const auto [job_id, choice] = it->second;
        Job& job = *running_.at(job_id);
        const auto c = static_cast<std::size_t>(choice);
        if (e.token >= 0 || !e.text.empty()) {
            std::optional<TokenLogprobs> lp;
            if (e.token >= 0 && job.spec.top_logprobs >= 0 && !job.rows[c].empty())
                lp = logprobs_of(e.token, job.rows[c], job.logsumexp[c], job.spec.top_logprobs);
            job.listener->on_token(choice, e.token, e.text, lp ? &*lp : nullptr);
        }
        if (e.token >= 0 && choice == 0 && !job.prompt_done) {
            job.prompt_done = true;
            for (int k = 1; k < static_cast<int>(job.sequences.size()) && !job.cancelled; ++k)
                start_choice(job, k);
        }
        if (!e.finished) continue;
        const SequenceResult& result = engine_->result(e.id);
        const ChoiceEnd end{e.stop, result.stop_string, result.stats};
        engine_->release(e.id);
        by_sequence_.erase(e.id);
        job.ended[c] = true;
        ++job.n_ended;
        --running_sequences_;
        job.listener->on_choice_end(choice, end);
        // The first choice ended before its first token (cancelled, or its cache was full): the
        // others never start.
        if (choice == 0 && !job.prompt_done) {
            for (std::size_t k = 1; k < job.sequences.size(); ++k) {
                if (job.ended[k]) continue;
                job.ended[k] = true;
                ++job.n_ended;
                --running_sequences_;
                job.listener->on_choice_end(static_cast<int>(k), ChoiceEnd{e.stop, {}, {}});
            }
        }
        end_job_if_done(job_id);
    }
}

// A step threw after the engine may have finished some sequences (their events were lost with
// the exception): those end now as they finished; every other running job is cancelled.
void GenerationService::recover_from_failed_step(const std::string& what) {
    std::vector<SequenceEvent> ended;
    std::vector<JobId> others;
    for (const auto& [id, job] : running_) {
        bool cancel = false;
        for (const auto& seq : job->sequences) {
            if (!seq || !by_sequence_.count(*seq)) continue;
            if (engine_->finished(*seq)) {
                SequenceEvent e;
                e.id = *seq;
                e.finished = true;
                e.stop = engine_->result(*seq).stop;
                ended.push_back(e);
            } else {
                cancel = true;
            }
        }
        if (cancel) {
            job->listener->on_failure(what);
            others.push_back(id);
        }
    }
    dispatch(ended);
    std::lock_guard lock(mutex_);
    cancels_.insert(cancels_.end(), others.begin(), others.end());
}

void GenerationService::end_job_if_done(JobId id) {
    const auto it = running_.find(id);
    if (it == running_.end()) return;
    Job& job = *it->second;
    if (job.n_ended < static_cast<int>(job.sequences.size())) return;
    const auto listener = job.listener;
    running_.erase(it);
    listener->on_job_end(true);
    job_gone(false);
}

void GenerationService::loop(const std::function<std::unique_ptr<Engine>()>& make_engine,
                             std::promise<void>& made) {
    try {
        engine_ = make_engine();
        n_ctx_ = engine_->n_ctx();
        publish_counters();
    } catch (...) {
        made.set_exception(std::current_exception());
        return;
    }
    made.set_value();  // (make_engine and made are gone from here on)
    while (true) {
        take_requests();
        admit();
        if (engine_->busy()) {
            std::vector<SequenceEvent> events;
            try {
                events = engine_->step();
            } catch (const std::exception& e) {
                // Out of device memory, a lost device, a bug: the jobs of the step fail (their
                // clients are told why) rather than the server hanging, and it serves on.
                log_warning(concat("server: a step failed: ", e.what()));
                recover_from_failed_step(e.what());
                continue;
            }
            dispatch(events);
            publish_counters();
            continue;
        }
        publish_counters();
        std::unique_lock lock(mutex_);
        if (stop_) break;
        wake_.wait(lock,
                   [&] { return !incoming_.empty() || !cancels_.empty() || cancel_all_ || stop_; });
        if (stop_ && incoming_.empty()) break;
    }
    engine_.reset();  // on the thread that made it (its pool unpins this thread)
}

}  // namespace minfer::server
