#include "hub/url.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>

#include "core/error.h"
#include "core/hex_escape.h"
#include "hub/ascii.h"

namespace minfer::hub {
namespace {

struct UrlDeleter {
    void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using UrlHandle = std::unique_ptr<CURLU, UrlDeleter>;

struct CurlFree {
    void operator()(char* p) const { curl_free(p); }
};

std::optional<std::string> get_part(CURLU* u, CURLUPart part, unsigned flags = 0) {
    char* raw = nullptr;
    if (curl_url_get(u, part, &raw, flags) != CURLUE_OK || raw == nullptr) return std::nullopt;
    std::unique_ptr<char, CurlFree> owned(raw);
    return std::string(raw);
}

bool has_unsafe_characters(std::string_view text) {
    return std::any_of(text.begin(), text.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u <= 0x20 || u == 0x7f;
    });
}

std::optional<HttpUrl> from_handle(CURLU* u) {
    HttpUrl url;
    auto scheme = get_part(u, CURLUPART_SCHEME);
    if (!scheme || (*scheme != "http" && *scheme != "https")) return std::nullopt;
    url.scheme = *scheme;
    if (get_part(u, CURLUPART_USER) || get_part(u, CURLUPART_PASSWORD)) return std::nullopt;
    auto host = get_part(u, CURLUPART_HOST);
    if (!host || host->empty()) return std::nullopt;
    url.host = ascii_lower(*host);
    auto port = get_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT);
    if (!port) return std::nullopt;
    try {
        url.port = std::stoi(*port);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    if (url.port <= 0 || url.port > 65535) return std::nullopt;
    url.path = get_part(u, CURLUPART_PATH).value_or("/");
    if (url.path.empty()) url.path = "/";
    return url;
}

}  // namespace

std::string HttpUrl::origin() const {
    return scheme + "://" + host + ":" + std::to_string(port);
}

std::string HttpUrl::authority() const {
    const int default_port = scheme == "https" ? 443 : 80;
    return port == default_port ? host : host + ":" + std::to_string(port);
}

std::optional<HttpUrl> parse_http_url(std::string_view text) {
    if (text.empty() || text.size() > 8192 || has_unsafe_characters(text)) return std::nullopt;
    UrlHandle u(curl_url());
    if (!u) return std::nullopt;
    if (curl_url_set(u.get(), CURLUPART_URL, std::string(text).c_str(), 0) != CURLUE_OK)
        return std::nullopt;
    return from_handle(u.get());
}

std::string resolve_redirect(std::string_view base, std::string_view location) {
    if (location.empty() || location.size() > 8192 || has_unsafe_characters(location))
        throw FormatError("a redirect without a usable Location");
    UrlHandle u(curl_url());
    if (!u || curl_url_set(u.get(), CURLUPART_URL, std::string(base).c_str(), 0) != CURLUE_OK)
        throw FormatError("a redirect from an unusable URL");
    // Setting a relative URL on a handle that holds an absolute one resolves it (RFC 3986).
    if (curl_url_set(u.get(), CURLUPART_URL, std::string(location).c_str(), 0) != CURLUE_OK)
        throw FormatError("a redirect to an unusable Location");
    const auto target = from_handle(u.get());
    auto full = get_part(u.get(), CURLUPART_URL);
    if (!target || !full) throw FormatError("a redirect to something that is not an http(s) URL");
    const auto from = parse_http_url(base);
    if (from && from->scheme == "https" && target->scheme == "http")
        throw FormatError("a redirect from https to plain http (refused)");
    return *full;
}

std::string percent_encode(std::string_view text, bool keep_slash) {
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        const auto u = static_cast<unsigned char>(c);
        const bool unreserved = std::isalnum(u) || c == '-' || c == '.' || c == '_' || c == '~';
        if (unreserved || (keep_slash && c == '/')) {
            out += c;
        } else {
            out += '%';
            append_hex(out, u, 2, HexCase::kUpper);
        }
    }
    return out;
}

std::optional<std::string> percent_decode(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '%') {
            out += text[i];
            continue;
        }
        const std::optional<uint32_t> byte = read_hex(text, i + 1, 2);
        if (!byte) return std::nullopt;
        const char c = static_cast<char>(*byte);
        if (c == '\0') return std::nullopt;
        out += c;
        i += 2;
    }
    return out;
}

}  // namespace minfer::hub
