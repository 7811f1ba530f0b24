#pragma once
// Where models come from and where they go, read once from the environment. The names and
// defaults are huggingface_hub's where it has them (so that minfer and huggingface-cli share one
// cache and one token) and ollama's for the registry:
//
//   HF_ENDPOINT            https://huggingface.co
//   HF_HUB_CACHE           else HF_HOME/hub, HF_HOME being XDG_CACHE_HOME/huggingface, else
//                          ~/.cache/huggingface
//   HF_TOKEN               else the file HF_TOKEN_PATH, else HF_HOME/token (huggingface-cli login)
//   HF_HUB_OFFLINE         1/ON/YES/TRUE: no request at all, the cache only
//   MINFER_OLLAMA_REGISTRY https://registry.ollama.ai
//   OLLAMA_MODELS          ollama's own store, used in place (else ~/.ollama/models and
//                          /usr/share/ollama/.ollama/models)
//   MINFER_CACHE           minfer's cache (ollama pulls, URLs, the usage record), else
//                          XDG_CACHE_HOME/minfer, else ~/.cache/minfer
// and for downloads (tests shorten them):
//   MINFER_HUB_STALL_TIMEOUT    seconds without a byte before a transfer is retried (30)
//   MINFER_HUB_CONNECT_TIMEOUT  seconds to connect (30)
//   MINFER_HUB_RETRIES          attempts after the first one (5)
//   MINFER_HUB_RETRY_DELAY      seconds before the first retry, doubling up to 60 (1)
//   MINFER_HUB_MAX_RETRY_AFTER  the longest Retry-After honoured, in seconds (120); longer fails

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace minfer::hub {

struct TransferPolicy {
    double stall_seconds = 30;
    double connect_seconds = 30;
    int retries = 5;
    double retry_delay_seconds = 1;
    double max_retry_delay_seconds = 60;
    double max_retry_after_seconds = 120;
};

struct HubSettings {
    std::string hf_endpoint;  // scheme://host[:port][/prefix], no trailing slash
    std::filesystem::path hf_cache;
    // Set only when a token is configured; never printed, logged or written anywhere.
    std::optional<std::string> hf_token;
    bool offline = false;
    std::string ollama_registry;  // scheme://host[:port], no trailing slash
    std::vector<std::filesystem::path> ollama_stores;
    std::filesystem::path minfer_cache;
    TransferPolicy transfer;

    // Throws UsageError naming the variable when one is malformed (an endpoint that is not an
    // http(s) URL, a token with characters an HTTP header cannot carry, a negative timeout), and
    // when no cache directory can be found (neither the variables nor HOME).
    static HubSettings from_environment();
};

}  // namespace minfer::hub
