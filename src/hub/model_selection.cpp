#include "hub/model_selection.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "gguf/split_path.h"
#include "hub/ascii.h"

namespace minfer::hub {
namespace {

bool is_alnum(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

std::string upper(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    return out;
}

std::string_view base_name(std::string_view path) {
    const std::size_t slash = path.rfind('/');
    return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_gguf(std::string_view path) {
    return path.size() > 5 && ascii_lower(path.substr(path.size() - 5)) == ".gguf";
}

// Projectors and importance matrices sit beside models in many repositories.
bool is_auxiliary(std::string_view path) {
    const std::string name = ascii_lower(base_name(path));
    return name.find("mmproj") != std::string::npos || name.find("imatrix") != std::string::npos;
}

struct Model {
    std::vector<std::string> parts;  // in part order; empty slots mean missing parts
    int count = 1;
    std::string first_present() const {
        for (const auto& p : parts)
            if (!p.empty()) return p;
        return "";
    }
    std::string display() const {
        if (count == 1) return parts.front();
        return concat(first_present(), " (", count, " parts)");
    }
    bool complete() const {
        return std::none_of(parts.begin(), parts.end(),
                            [](const std::string& p) { return p.empty(); });
    }
};

// Every .gguf file (less projectors and imatrix files if asked), split sets grouped, by name.
std::vector<Model> group_models(const std::vector<std::string>& paths, bool skip_auxiliary) {
    std::map<std::string, Model> by_key;
    for (const auto& p : paths) {
        if (!is_gguf(p) || (skip_auxiliary && is_auxiliary(p))) continue;
        const auto split = parse_split_name(p);
        if (!split || split->count < 2) {
            by_key[p] = Model{{p}, 1};
            continue;
        }
        Model& m = by_key[concat(split->prefix, "\n", split->count)];
        m.count = split->count;
        m.parts.resize(static_cast<std::size_t>(split->count));
        m.parts[static_cast<std::size_t>(split->index - 1)] = p;
    }
    std::vector<Model> out;
    for (auto& [key, m] : by_key) out.push_back(std::move(m));
    return out;
}

std::string list_of(const std::vector<Model>& models) {
    std::string s;
    std::size_t shown = 0;
    for (const auto& m : models) {
        if (shown == 12) {
            s += concat(", and ", models.size() - shown, " more");
            break;
        }
        s += (s.empty() ? "" : ", ") + m.display();
        ++shown;
    }
    return s;
}

std::vector<std::string> whole_set(const Model& m, std::string_view reference) {
    if (!m.complete()) {
        for (std::size_t i = 0; i < m.parts.size(); ++i) {
            if (m.parts[i].empty()) {
                throw IoError(concat(reference, ": the split model ", m.first_present(),
                                     " is incomplete in the repository: part ", i + 1, " of ",
                                     m.count, " is missing"));
            }
        }
    }
    return m.parts;
}

// Whether the tag (upper-case) is a quantization name: Q4_K_M, IQ4_XS, Q8_0, F16, BF16, ...
bool is_quant_token(std::string_view token) {
    if (token == "F16" || token == "BF16" || token == "F32" || token == "FP16" || token == "FP32")
        return true;
    std::size_t i = 0;
    if (i < token.size() && token[i] == 'I') ++i;
    if (i >= token.size() || token[i] != 'Q') return false;
    ++i;
    if (i >= token.size() || !std::isdigit(static_cast<unsigned char>(token[i]))) return false;
    ++i;
    while (i < token.size()) {
        if (token[i] != '_' || i + 1 >= token.size()) return false;
        ++i;
        const std::size_t start = i;
        while (i < token.size() && is_alnum(token[i])) ++i;
        if (i == start) return false;
    }
    return true;
}

}  // namespace

bool has_quant_tag(std::string_view path, std::string_view tag) {
    if (tag.empty()) return false;
    const std::string hay = ascii_lower(path), needle = ascii_lower(tag);
    for (std::size_t at = hay.find(needle); at != std::string::npos;
         at = hay.find(needle, at + 1)) {
        const std::size_t end = at + needle.size();
        const bool start_ok = at == 0 || !is_alnum(hay[at - 1]);
        const bool end_ok = end == hay.size() || (!is_alnum(hay[end]) && hay[end] != '_');
        if (start_ok && end_ok) return true;
    }
    return false;
}

std::string quant_tag_of(std::string_view path) {
    std::string found;
    const std::string up = upper(path);
    std::size_t i = 0;
    while (i < up.size()) {
        // A token: a run of letters, digits and '_'.
        std::size_t end = i;
        while (end < up.size() && (is_alnum(up[end]) || up[end] == '_')) ++end;
        const std::string_view token = std::string_view(up).substr(i, end - i);
        // The tag may follow an underscore inside the token (model_Q4_K_M).
        for (std::size_t start = 0; start < token.size(); ++start) {
            if (start > 0 && token[start - 1] != '_') continue;
            if (is_quant_token(token.substr(start))) {
                found = std::string(token.substr(start));
                break;
            }
        }
        i = end == i ? i + 1 : end;
    }
    return found;
}

std::vector<std::string> select_model_files(const std::vector<std::string>& repo_paths,
                                            std::string_view quant, std::string_view file,
                                            std::string_view reference) {
    if (!file.empty()) {
        if (std::find(repo_paths.begin(), repo_paths.end(), file) == repo_paths.end()) {
            const auto models = group_models(repo_paths, false);
            throw IoError(concat(reference, ": the repository has no file '", file, "'",
                                 models.empty()
                                     ? std::string(" (and no .gguf file at all)")
                                     : concat(" (its GGUF files: ", list_of(models), ")")));
        }
        const auto split = parse_split_name(std::string(file));
        if (!split || split->count < 2) return {std::string(file)};
        for (const auto& m : group_models(repo_paths, false)) {
            if (std::find(m.parts.begin(), m.parts.end(), file) != m.parts.end())
                return whole_set(m, reference);
        }
        return {std::string(file)};
    }

    const auto models = group_models(repo_paths, true);
    if (models.empty()) throw IoError(concat(reference, ": the repository has no GGUF model file"));
    std::vector<Model> matching;
    const std::string_view wanted = quant.empty() ? std::string_view("Q4_K_M") : quant;
    for (const auto& m : models)
        if (has_quant_tag(m.first_present(), wanted)) matching.push_back(m);

    if (quant.empty() && models.size() == 1) return whole_set(models.front(), reference);
    if (matching.size() == 1) return whole_set(matching.front(), reference);
    if (matching.empty() && !quant.empty()) {
        throw IoError(concat(reference, ": no model file tagged ", quant,
                             " in the repository (its models: ", list_of(models), ")"));
    }
    if (matching.empty()) {
        throw UsageError(concat(reference, ": the repository holds ", models.size(),
                                " models and none is Q4_K_M; choose one with :QUANT or "
                                "/FILE.gguf: ",
                                list_of(models)));
    }
    throw UsageError(concat(reference, ": ", matching.size(), " models are tagged ", wanted,
                            "; choose one with /FILE.gguf: ", list_of(matching)));
}

}  // namespace minfer::hub
