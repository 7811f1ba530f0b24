#pragma once
// What a user types as MODEL, parsed and checked before anything is fetched:
//
//   PATH                                  a .gguf file, a split model's first part, a directory
//   hf:OWNER/REPO[@REVISION][:QUANT]      a Hugging Face repository's model file
//   hf:OWNER/REPO[@REVISION]/PATH.gguf    one file of it (a split part brings its whole set)
//   ollama:NAME[:TAG], ollama:USER/NAME[:TAG]   a model of ollama's registry (tag "latest")
//   https://HOST/.../FILE.gguf            a plain URL (http:// too)
//
// A REVISION is a branch, tag or commit; one with a '/' other than refs/pr/N is written with %2F
// (hf:o/r@feature%2Fx) so that it cannot be mistaken for a file path. Everything that will become
// part of a file name (owner, repository, revision, path, quantization, ollama names) is checked
// here: no "..", no absolute path, no backslash, no control character.

#include <string>
#include <string_view>
#include <variant>

namespace minfer::hub {

struct PathReference {
    std::string path;
};

struct HfReference {
    std::string repo;               // "OWNER/REPO"
    std::string revision = "main";  // decoded ("refs/pr/1")
    bool revision_given = false;
    std::string quant;  // as typed, "" when none
    std::string file;   // path inside the repository, "" when none
};

struct OllamaReference {
    std::string namespace_name = "library";
    std::string name;
    std::string tag = "latest";
};

struct UrlReference {
    std::string url;
    std::string file_name;  // the last path segment, decoded and checked
};

using ModelReference = std::variant<PathReference, HfReference, OllamaReference, UrlReference>;

// Throws UsageError with a one-line message naming the part that is wrong.
ModelReference parse_reference(std::string_view text);

// The canonical spelling: defaults left out (hf:o/r, ollama:name), a revision with '/' encoded
// where it must be.
std::string to_string(const ModelReference& reference);

// "hf:", "ollama:", "http://", "https://": something fetched rather than a local path.
bool looks_remote(std::string_view text);
// The same for a parsed reference: anything but a PathReference.
bool is_remote(const ModelReference& reference);

// A relative path that is safe to join under a directory: non-empty '/'-separated components,
// none "." or "..", no leading '/', no backslash, no control character (C0, DEL, C1), valid
// UTF-8, at most 1024 bytes and 255 per component.
bool is_safe_relative_path(std::string_view path);

// A 40-digit lowercase hexadecimal commit id.
bool is_commit_id(std::string_view text);
// A 64-digit lowercase hexadecimal sha256.
bool is_sha256_hex(std::string_view text);

}  // namespace minfer::hub
