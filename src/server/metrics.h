#pragma once
// GET /metrics in Prometheus' text format: requests by status, prompt and generated tokens,
// running and queued sequences, KV blocks, prefix-cache hits, and histograms of the time to first
// token and the inter-token latency. Thread-safe.

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/generation_service.h"

namespace minfer::server {

class Metrics {
  public:
    void count_request(int status);
    void count_tokens(int64_t prompt, int64_t generated);
    void observe_time_to_first_token(double seconds);
    void observe_inter_token_latency(double seconds);
    std::string render(const ServiceCounters& service) const;

  private:
    // Upper bounds in seconds, shared by both histograms (1 ms to 60 s).
    static constexpr std::array<double, 16> kBuckets = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60};
    struct Histogram {
        std::array<uint64_t, kBuckets.size()> counts{};  // per bucket (not cumulative)
        uint64_t count = 0;
        double sum = 0;
        void observe(double x);
        void render(std::string& out, const char* name, const char* help) const;
    };

    mutable std::mutex mutex_;
    std::map<int, uint64_t> requests_by_status_;
    uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
    Histogram ttft_, itl_;
};

// The latency figures of one request, observed as its tokens come: the time from its arrival to
// its first token, and between the tokens of each choice. Not thread-safe (the engine thread's).
class LatencyObserver {
  public:
    LatencyObserver(Metrics* metrics, std::chrono::steady_clock::time_point arrival, int n_choices)
        : metrics_(metrics), arrival_(arrival), last_(static_cast<std::size_t>(n_choices)) {}
    void token(int choice);

  private:
    Metrics* metrics_;  // none: nothing observed
    std::chrono::steady_clock::time_point arrival_;
    bool any_ = false;
    std::vector<std::optional<std::chrono::steady_clock::time_point>> last_;  // per choice
};

}  // namespace minfer::server
