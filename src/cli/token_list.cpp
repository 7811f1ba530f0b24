#include "cli/token_list.h"

#include <charconv>
#include <string>

#include "core/error.h"

namespace minfer::cli {

std::vector<int32_t> parse_token_list(std::string_view text, std::string_view flag) {
    std::vector<int32_t> ids;
    std::string_view rest = text;
    // Separators: commas and white space; one pair of brackets around the whole list.
    const auto is_separator = [](char c) {
        return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
    };
    const auto trim = [&](std::string_view s) {
        while (!s.empty() && is_separator(s.front()) && s.front() != ',') s.remove_prefix(1);
        while (!s.empty() && is_separator(s.back()) && s.back() != ',') s.remove_suffix(1);
        return s;
    };
    rest = trim(rest);
    if (!rest.empty() && rest.front() == '[') {
        if (rest.back() != ']')
            throw UsageError(concat(flag, ": '", text, "' opens '[' but does not close it"));
        rest = rest.substr(1, rest.size() - 2);
    }
    while (!rest.empty()) {
        std::size_t n = 0;
        while (n < rest.size() && !is_separator(rest[n])) ++n;
        const std::string_view item = rest.substr(0, n);
        rest.remove_prefix(n);
        if (!rest.empty()) rest.remove_prefix(1);
        if (item.empty()) continue;
        uint32_t value = 0;
        const auto [end, error] = std::from_chars(item.data(), item.data() + item.size(), value);
        if (error != std::errc{} || end != item.data() + item.size() || value > INT32_MAX) {
            throw UsageError(concat(flag, ": '", item,
                                    "' is not a token id (expected ids like 1,2,3 or [1, 2, 3])"));
        }
        ids.push_back(static_cast<int32_t>(value));
    }
    if (ids.empty()) throw UsageError(concat(flag, ": the token list is empty"));
    return ids;
}

void check_token_ids(const std::vector<int32_t>& ids, int64_t n_vocab, std::string_view flag) {
    for (const int32_t id : ids) {
        if (id >= n_vocab) {
            throw UsageError(concat(flag, ": token id ", id, " is out of range: the model has ",
                                    n_vocab, " tokens"));
        }
    }
}

}  // namespace minfer::cli
