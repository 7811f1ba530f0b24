#include "hub/reference.h"

#include <algorithm>
#include <cctype>

#include "core/error.h"
#include "core/utf8.h"
#include "hub/ascii.h"
#include "hub/url.h"

namespace minfer::hub {
namespace {

bool is_ascii_alnum(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool ends_with_gguf(std::string_view s) {
    return s.size() >= 5 && ascii_lower(s.substr(s.size() - 5)) == ".gguf";
}

// huggingface_hub's validate_repo_id for each half: letters, digits, '-', '_', '.', at most 96,
// no "--" or ".." (the cache folder joins owner and name with "--"), no '-' or '.' at either end.
bool is_valid_repo_part(std::string_view s) {
    if (s.empty() || s.size() > 96) return false;
    for (char c : s)
        if (!is_ascii_alnum(c) && c != '-' && c != '_' && c != '.') return false;
    if (s.front() == '-' || s.front() == '.' || s.back() == '-' || s.back() == '.') return false;
    return s.find("--") == std::string_view::npos && s.find("..") == std::string_view::npos;
}

// Branch and tag names as git allows them, narrowed to what is safe as a file path under refs/.
bool is_valid_revision(std::string_view s) {
    if (s.empty() || s.size() > 255) return false;
    for (char c : s)
        if (!is_ascii_alnum(c) && c != '-' && c != '_' && c != '.' && c != '/' && c != '+')
            return false;
    return is_safe_relative_path(s);
}

bool is_valid_quant(std::string_view s) {
    if (s.empty() || s.size() > 64) return false;
    for (char c : s)
        if (!is_ascii_alnum(c) && c != '-' && c != '_' && c != '.') return false;
    return s.front() != '.' && s.front() != '-';
}

// ollama's names: a letter or digit, then letters, digits, '.', '-', '_'; at most 128 (tags) or
// 80 (names, namespaces); no "..".
bool is_valid_ollama_part(std::string_view s, std::size_t max_size) {
    if (s.empty() || s.size() > max_size || !is_ascii_alnum(s.front())) return false;
    for (char c : s)
        if (!is_ascii_alnum(c) && c != '-' && c != '_' && c != '.') return false;
    return s.find("..") == std::string_view::npos;
}

bool is_pr_revision_prefix(std::string_view rest) {
    return rest.rfind("refs/pr/", 0) == 0;
}

[[noreturn]] void bad(std::string_view text, std::string_view what) {
    throw UsageError(concat("'", text, "': ", what));
}

HfReference parse_hf(std::string_view text, std::string_view body) {
    constexpr std::string_view kForm =
        "expected hf:OWNER/REPO[@REVISION][:QUANT] or hf:OWNER/REPO[@REVISION]/PATH/FILE.gguf";
    HfReference ref;
    const std::size_t slash = body.find('/');
    if (slash == std::string_view::npos) bad(text, kForm);
    const std::string_view owner = body.substr(0, slash);
    std::size_t end = slash + 1;
    while (end < body.size() && body[end] != '@' && body[end] != ':' && body[end] != '/') ++end;
    const std::string_view name = body.substr(slash + 1, end - slash - 1);
    if (!is_valid_repo_part(owner) || !is_valid_repo_part(name)) {
        bad(text, concat("'", owner, "/", name,
                         "' is not a repository name (OWNER/REPO: letters, digits, '-', '_', "
                         "'.', at most 96 each, no '--' or '..')"));
    }
    ref.repo = concat(owner, "/", name);
    std::string_view rest = body.substr(end);

    if (!rest.empty() && rest.front() == '@') {
        rest.remove_prefix(1);
        std::size_t rev_end = rest.find(':');
        const std::size_t slash_at = rest.find('/');
        if (is_pr_revision_prefix(rest)) {
            // refs/pr/N: the revision runs to the first '/' or ':' after N.
            std::size_t i = 8;
            while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9') ++i;
            rev_end = i;
        } else if (slash_at != std::string_view::npos &&
                   (rev_end == std::string_view::npos || slash_at < rev_end)) {
            rev_end = slash_at;
        }
        if (rev_end == std::string_view::npos) rev_end = rest.size();
        const std::string_view encoded = rest.substr(0, rev_end);
        const auto decoded = percent_decode(encoded);
        if (encoded.empty() || !decoded || !is_valid_revision(*decoded)) {
            bad(text, concat("'", encoded,
                             "' is not a revision (a branch, tag or commit: letters, digits, "
                             "'-', '_', '.', '+', '/' written %2F except in refs/pr/N)"));
        }
        ref.revision = *decoded;
        ref.revision_given = true;
        rest.remove_prefix(rev_end);
    }

    if (!rest.empty() && rest.front() == ':') {
        ref.quant = std::string(rest.substr(1));
        if (!is_valid_quant(ref.quant)) {
            bad(text, concat("'", ref.quant,
                             "' is not a quantization tag (letters, digits, '_', '-', '.', "
                             "like Q4_K_M)"));
        }
    } else if (!rest.empty() && rest.front() == '/') {
        ref.file = std::string(rest.substr(1));
        if (!is_safe_relative_path(ref.file)) {
            bad(text, concat("'", ref.file,
                             "' is not a file path inside a repository (no '..', no absolute "
                             "path, no backslash, no control character)"));
        }
        if (!ends_with_gguf(ref.file)) bad(text, concat("'", ref.file, "' is not a .gguf file"));
    } else if (!rest.empty()) {
        bad(text, kForm);
    }
    return ref;
}

OllamaReference parse_ollama(std::string_view text, std::string_view body) {
    OllamaReference ref;
    std::string_view path = body;
    if (const std::size_t colon = body.find(':'); colon != std::string_view::npos) {
        path = body.substr(0, colon);
        ref.tag = std::string(body.substr(colon + 1));
        if (!is_valid_ollama_part(ref.tag, 128))
            bad(text, concat("'", ref.tag, "' is not a tag (letters, digits, '.', '-', '_')"));
    }
    if (const std::size_t slash = path.find('/'); slash != std::string_view::npos) {
        ref.namespace_name = std::string(path.substr(0, slash));
        path.remove_prefix(slash + 1);
        if (!is_valid_ollama_part(ref.namespace_name, 80)) {
            bad(text, concat("'", ref.namespace_name,
                             "' is not a user name (letters, digits, '.', '-', '_')"));
        }
    }
    ref.name = std::string(path);
    if (!is_valid_ollama_part(ref.name, 80)) {
        bad(text, concat("expected ollama:NAME[:TAG] or ollama:USER/NAME[:TAG]; '", ref.name,
                         "' is not a model name (letters, digits, '.', '-', '_')"));
    }
    return ref;
}

UrlReference parse_url(std::string_view text) {
    const auto url = parse_http_url(text);
    if (!url) bad(text, "not a usable http:// or https:// URL");
    const std::string& path = url->path;
    const auto last = path.substr(path.rfind('/') + 1);
    const auto name = percent_decode(last);
    if (!name || name->find('/') != std::string::npos || !is_safe_relative_path(*name) ||
        !ends_with_gguf(*name)) {
        bad(text, "a model URL must end in a file name FILE.gguf");
    }
    return UrlReference{std::string(text), *name};
}

}  // namespace

bool looks_remote(std::string_view text) {
    for (std::string_view scheme : {"hf:", "ollama:", "http://", "https://"})
        if (text.rfind(scheme, 0) == 0) return true;
    return false;
}

bool is_remote(const ModelReference& reference) {
    return !std::holds_alternative<PathReference>(reference);
}

ModelReference parse_reference(std::string_view text) {
    if (text.rfind("hf:", 0) == 0) {
        std::string_view body = text.substr(3);
        if (body.rfind("//", 0) == 0) bad(text, "write hf:OWNER/REPO (without '//')");
        return parse_hf(text, body);
    }
    if (text.rfind("ollama:", 0) == 0) return parse_ollama(text, text.substr(7));
    if (text.rfind("http://", 0) == 0 || text.rfind("https://", 0) == 0) return parse_url(text);
    if (text.empty()) throw UsageError("the model reference is empty");
    return PathReference{std::string(text)};
}

std::string to_string(const ModelReference& reference) {
    if (const auto* p = std::get_if<PathReference>(&reference)) return p->path;
    if (const auto* u = std::get_if<UrlReference>(&reference)) return u->url;
    if (const auto* o = std::get_if<OllamaReference>(&reference)) {
        std::string s = "ollama:";
        if (o->namespace_name != "library") s += o->namespace_name + "/";
        s += o->name;
        if (o->tag != "latest") s += ":" + o->tag;
        return s;
    }
    const auto& h = std::get<HfReference>(reference);
    std::string s = "hf:" + h.repo;
    if (h.revision_given) {
        std::string rev = h.revision;
        // refs/pr/N is written as it is; any other '/' is encoded.
        const bool pr =
            is_pr_revision_prefix(rev) && rev.size() > 8 &&
            std::all_of(rev.begin() + 8, rev.end(), [](char c) { return c >= '0' && c <= '9'; });
        if (!pr) {
            std::string encoded;
            for (char c : rev) encoded += c == '/' ? std::string("%2F") : std::string(1, c);
            rev = encoded;
        }
        s += "@" + rev;
    }
    if (!h.quant.empty()) s += ":" + h.quant;
    if (!h.file.empty()) s += "/" + h.file;
    return s;
}

bool is_safe_relative_path(std::string_view path) {
    if (path.empty() || path.size() > 1024 || path.front() == '/') return false;
    if (!is_valid_utf8(path)) return false;
    for (std::size_t i = 0; i < path.size(); ++i) {
        const auto u = static_cast<unsigned char>(path[i]);
        if (u < 0x20 || u == 0x7f || path[i] == '\\') return false;
        // C1 controls, U+0080..U+009F, are C2 80..C2 9F in UTF-8.
        if (u == 0xC2 && i + 1 < path.size()) {
            const auto next = static_cast<unsigned char>(path[i + 1]);
            if (next >= 0x80 && next <= 0x9F) return false;
        }
    }
    std::size_t start = 0;
    while (start <= path.size()) {
        std::size_t end = path.find('/', start);
        if (end == std::string_view::npos) end = path.size();
        const std::string_view part = path.substr(start, end - start);
        if (part.empty() || part == "." || part == ".." || part.size() > 255) return false;
        start = end + 1;
    }
    return true;
}

bool is_commit_id(std::string_view text) {
    return text.size() == 40 && std::all_of(text.begin(), text.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

bool is_sha256_hex(std::string_view text) {
    return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
               return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
           });
}

}  // namespace minfer::hub
