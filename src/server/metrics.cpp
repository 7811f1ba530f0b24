#include "server/metrics.h"

#include "core/error.h"

namespace minfer::server {

void Metrics::Histogram::observe(double x) {
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        if (x <= kBuckets[i]) {
            ++counts[i];
            break;
        }
    }
    ++count;  // (above the last bound: only in +Inf)
    sum += x;
}

void Metrics::Histogram::render(std::string& out, const char* name, const char* help) const {
    out += concat("# HELP ", name, " ", help, "\n# TYPE ", name, " histogram\n");
    uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
        cumulative += counts[i];
        out += concat(name, "_bucket{le=\"", kBuckets[i], "\"} ", cumulative, "\n");
    }
    out += concat(name, "_bucket{le=\"+Inf\"} ", count, "\n", name, "_sum ", sum, "\n", name,
                  "_count ", count, "\n");
}

void Metrics::count_request(int status) {
    std::lock_guard lock(mutex_);
    ++requests_by_status_[status];
}

void Metrics::count_tokens(int64_t prompt, int64_t generated) {
    std::lock_guard lock(mutex_);
    prompt_tokens_ += static_cast<uint64_t>(prompt);
    generated_tokens_ += static_cast<uint64_t>(generated);
}

void Metrics::observe_time_to_first_token(double seconds) {
    std::lock_guard lock(mutex_);
    ttft_.observe(seconds);
}

void Metrics::observe_inter_token_latency(double seconds) {
    std::lock_guard lock(mutex_);
    itl_.observe(seconds);
}

std::string Metrics::render(const ServiceCounters& s) const {
    std::lock_guard lock(mutex_);
    std::string out;
    const auto metric = [&](const char* name, const char* type, const char* help, auto value) {
        out += concat("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n", name, " ",
                      value, "\n");
    };
    out +=
        "# HELP minfer_requests_total HTTP requests answered, by status.\n"
        "# TYPE minfer_requests_total counter\n";
    for (const auto& [status, n] : requests_by_status_)
        out += concat("minfer_requests_total{status=\"", status, "\"} ", n, "\n");
    metric("minfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.",
           prompt_tokens_);
    metric("minfer_generated_tokens_total", "counter", "Tokens generated.", generated_tokens_);
    metric("minfer_sequences_running", "gauge", "Sequences being evaluated.", s.running_sequences);
    metric("minfer_requests_queued", "gauge", "Requests waiting for a free sequence.",
           s.queued_jobs);
    metric("minfer_kv_blocks_used", "gauge", "KV cache blocks in use (held or cached).",
           s.kv_blocks_used);
    metric("minfer_kv_blocks_total", "gauge", "KV cache blocks in the pool.", s.kv_blocks_total);
    metric("minfer_prefix_cache_hit_tokens_total", "counter",
           "Prompt tokens whose keys and values came from the prefix cache.", s.prefix_hit_tokens);
    ttft_.render(out, "minfer_time_to_first_token_seconds",
                 "From a request's arrival to its first generated token.");
    itl_.render(out, "minfer_inter_token_latency_seconds",
                "Between two generated tokens of a sequence.");
    return out;
}

void LatencyObserver::token(int choice) {
    const auto now = std::chrono::steady_clock::now();
    auto& last = last_[static_cast<std::size_t>(choice)];
    if (metrics_ != nullptr) {
        if (!any_)
            metrics_->observe_time_to_first_token(
                std::chrono::duration<double>(now - arrival_).count());
        else if (last)
            metrics_->observe_inter_token_latency(
                std::chrono::duration<double>(now - *last).count());
    }
    any_ = true;
    last = now;
}

}  // namespace minfer::server
