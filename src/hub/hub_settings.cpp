#include "hub/hub_settings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/file_io.h"
#include "hub/url.h"

namespace minfer::hub {
namespace {

std::optional<std::string> env(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
}

std::filesystem::path home_dir() {
    const auto home = env("HOME");
    if (!home) {
        throw UsageError(
            "HOME is not set: set HF_HUB_CACHE and MINFER_CACHE to say where models go");
    }
    return *home;
}

// huggingface_hub's _is_true.
bool is_true(const std::optional<std::string>& v) {
    if (!v) return false;
    std::string up = *v;
    std::transform(up.begin(), up.end(), up.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return up == "1" || up == "ON" || up == "YES" || up == "TRUE";
}

std::string endpoint_from(const char* name, const std::string& fallback, bool allow_path) {
    std::string value = env(name).value_or(fallback);
    while (!value.empty() && value.back() == '/') value.pop_back();
    const auto url = parse_http_url(value);
    if (!url || (!allow_path && url->path != "/")) {
        throw UsageError(concat(name, " is not an http:// or https:// URL",
                                allow_path ? "" : " without a path", ": '", value, "'"));
    }
    return value;
}

double seconds_from(const char* name, double fallback) {
    const auto v = env(name);
    if (!v) return fallback;
    char* end = nullptr;
    const double s = std::strtod(v->c_str(), &end);
    if (end == v->c_str() || *end != '\0' || !std::isfinite(s) || s < 0 || s > 86400)
        throw UsageError(concat(name, " must be a number of seconds (0 to 86400), not '", *v, "'"));
    return s;
}

int count_from(const char* name, int fallback) {
    const auto v = env(name);
    if (!v) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v->c_str(), &end, 10);
    if (end == v->c_str() || *end != '\0' || n < 0 || n > 100)
        throw UsageError(concat(name, " must be a whole number from 0 to 100, not '", *v, "'"));
    return static_cast<int>(n);
}

// A token goes into an "Authorization: Bearer" header: visible ASCII only, so it can neither
// break the header nor smuggle another one. Its value is never quoted in the message.
std::optional<std::string> checked_token(std::string token, const std::string& where) {
    const auto not_space = [](unsigned char c) { return !std::isspace(c); };
    token.erase(token.begin(), std::find_if(token.begin(), token.end(), not_space));
    token.erase(std::find_if(token.rbegin(), token.rend(), not_space).base(), token.end());
    if (token.empty()) return std::nullopt;
    const bool printable = std::all_of(token.begin(), token.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u > 0x20 && u < 0x7f;
    });
    if (!printable || token.size() > 4096) {
        throw UsageError(concat("the Hugging Face token from ", where,
                                " holds characters an HTTP header cannot carry (or is longer than "
                                "4096 bytes); set HF_TOKEN to the token alone"));
    }
    return token;
}

}  // namespace

HubSettings HubSettings::from_environment() {
    HubSettings s;
    s.hf_endpoint = endpoint_from("HF_ENDPOINT", "https://huggingface.co", true);
    s.ollama_registry =
        endpoint_from("MINFER_OLLAMA_REGISTRY", "https://registry.ollama.ai", false);
    s.offline = is_true(env("HF_HUB_OFFLINE"));

    const auto xdg_cache = env("XDG_CACHE_HOME");
    const auto cache_base = [&] {
        return xdg_cache ? std::filesystem::path(*xdg_cache) : home_dir() / ".cache";
    };
    const auto hf_home_env = env("HF_HOME");
    const auto hf_home = [&] {
        return hf_home_env ? std::filesystem::path(*hf_home_env) : cache_base() / "huggingface";
    };
    if (const auto v = env("HF_HUB_CACHE"))
        s.hf_cache = *v;
    else
        s.hf_cache = hf_home() / "hub";
    if (const auto v = env("MINFER_CACHE"))
        s.minfer_cache = *v;
    else
        s.minfer_cache = cache_base() / "minfer";

    if (const auto token = env("HF_TOKEN")) {
        s.hf_token = checked_token(*token, "HF_TOKEN");
    } else {
        std::filesystem::path token_file;
        if (const auto v = env("HF_TOKEN_PATH"))
            token_file = *v;
        else if (hf_home_env || xdg_cache || env("HOME"))
            token_file = hf_home() / "token";
        std::error_code ec;
        if (!token_file.empty() && std::filesystem::is_regular_file(token_file, ec)) {
            s.hf_token =
                checked_token(read_file(token_file, "the Hugging Face token file", 64 * 1024),
                              token_file.string());
        }
    }

    if (const auto v = env("OLLAMA_MODELS")) {
        s.ollama_stores.emplace_back(*v);
    } else {
        if (const auto home = env("HOME"))
            s.ollama_stores.push_back(std::filesystem::path(*home) / ".ollama" / "models");
        s.ollama_stores.emplace_back("/usr/share/ollama/.ollama/models");
    }

    TransferPolicy& t = s.transfer;
    t.stall_seconds = seconds_from("MINFER_HUB_STALL_TIMEOUT", t.stall_seconds);
    t.connect_seconds = seconds_from("MINFER_HUB_CONNECT_TIMEOUT", t.connect_seconds);
    t.retries = count_from("MINFER_HUB_RETRIES", t.retries);
    t.retry_delay_seconds = seconds_from("MINFER_HUB_RETRY_DELAY", t.retry_delay_seconds);
    t.max_retry_after_seconds =
        seconds_from("MINFER_HUB_MAX_RETRY_AFTER", t.max_retry_after_seconds);
    if (t.stall_seconds <= 0 || t.connect_seconds <= 0)
        throw UsageError("MINFER_HUB_STALL_TIMEOUT and MINFER_HUB_CONNECT_TIMEOUT must be above 0");
    return s;
}

}  // namespace minfer::hub
