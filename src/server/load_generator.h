#pragma once
// `minfer bench-serve`: a load generator that speaks the OpenAI API to any server (minfer serve,
// llama-server, vLLM, ollama's /v1). C clients at a time each send streamed chat completions of a
// prompt of about P tokens (random words, distinct per request, so that no prefix cache can skip
// them) asking for exactly G tokens (ignore_eos), and time every streamed token: aggregate
// generated tokens/s, requests/s, time to first token and inter-token latency percentiles. The
// requests ask for log-probabilities (no alternatives) so that every token is seen as it arrives,
// even one whose text is empty.
// Plain HTTP only (put TLS in front elsewhere).

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace minfer::server {

struct LoadTestOptions {
    std::string url;  // http://HOST:PORT[/v1]
    std::string model = "default";
    std::string api_key;
    int concurrency = 1;
    int requests = 8;
    int prompt_tokens = 128;  // approximate: words of one token each in common vocabularies
    int gen_tokens = 128;
    int timeout_seconds = 600;  // a request taking longer fails
    uint64_t seed = 1;
    // When set (Ctrl-C), no request starts any more and those in flight are cut; the result
    // holds the requests that ended before.
    const std::atomic<bool>* stop = nullptr;
};

struct LoadTestResult {
    int concurrency = 0;  // clients that ran: at most the requests
    int requests = 0;     // that ended (fewer than asked for when interrupted)
    bool interrupted = false;
    int failed = 0;
    std::string first_error;
    double seconds = 0;
    int64_t generated_tokens = 0;   // from each response's usage
    double mean_prompt_tokens = 0;  // as the server counted them
    double tokens_per_second = 0;   // generated, all requests together
    double requests_per_second = 0;
    double ttft_p50 = 0, ttft_p99 = 0;  // seconds, time to first token
    double itl_p50 = 0, itl_p99 = 0;    // seconds, between streamed tokens
};

// What the server says runs the model (minfer serve's /v1/models "meta": backend "CPU",
// "Vulkan" or "Reference", and the device in a line); empty where it does not say (llama-server,
// vLLM) or cannot be asked.
struct ServerDevice {
    std::string backend, device;
};
ServerDevice describe_server_device(const LoadTestOptions& options);

// Throws UsageError for a URL that run_load_test cannot use (not http://, a bad host or port, a
// space or control character), so that a command can check it before it prints anything.
void check_load_test_url(const std::string& url);

// Throws UsageError for a URL it cannot use, LimitError when its client threads cannot be
// started; failed requests are counted, not thrown.
LoadTestResult run_load_test(const LoadTestOptions& options,
                             const std::function<void(int done, int total)>& progress = {});

}  // namespace minfer::server
