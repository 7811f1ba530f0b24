#pragma once
// URLs as the hub layer needs them: parsed by libcurl's URL API (the parser that also sends the
// request, so that what we check is what is fetched), compared by origin to decide where a token
// may go, resolved against a redirect's Location, and path segments percent-encoded.

#include <optional>
#include <string>
#include <string_view>

namespace minfer::hub {

struct HttpUrl {
    std::string scheme;  // "http" or "https"
    std::string host;    // lowercase; an IPv6 address keeps its brackets
    int port = 0;        // explicit, else the scheme's default
    std::string path;    // "/..." (at least "/"), without query or fragment

    // scheme://host:port, the unit to which a credential may be sent.
    std::string origin() const;
    // host, or host:port when the port is not the scheme's default.
    std::string authority() const;
};

// nullopt unless `text` is an absolute http:// or https:// URL with a host, no user:password part
// and no control characters or spaces.
std::optional<HttpUrl> parse_http_url(std::string_view text);

// The absolute URL a redirect's Location names, relative to `base`. Throws FormatError when the
// result is not an http(s) URL or would go from https to http.
std::string resolve_redirect(std::string_view base, std::string_view location);

// Percent-encodes everything but unreserved characters (RFC 3986: A-Z a-z 0-9 - . _ ~), and '/'
// when keep_slash: a revision such as "refs/pr/1" is one segment ("refs%2Fpr%2F1"), a file path
// inside a repository keeps its slashes.
std::string percent_encode(std::string_view text, bool keep_slash);

// Decodes %XX escapes; nullopt for a malformed escape or an encoded NUL.
std::optional<std::string> percent_decode(std::string_view text);

}  // namespace minfer::hub
