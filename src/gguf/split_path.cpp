#include "gguf/split_path.h"

#include <cstdio>

namespace minfer {
namespace {

std::optional<int> parse_five_digits(const std::string& s) {
    if (s.size() != 5) return std::nullopt;
    int v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + (c - '0');
    }
    return v;
}

}  // namespace

std::optional<SplitName> parse_split_name(const std::filesystem::path& path) {
    const std::string s = path.string();
    // "-00001-of-00003.gguf" is 20 characters.
    constexpr std::size_t kSuffix = 20;
    if (s.size() < kSuffix || s.compare(s.size() - 5, 5, ".gguf") != 0) return std::nullopt;
    const std::string tail = s.substr(s.size() - kSuffix);
    if (tail[0] != '-' || tail.compare(6, 4, "-of-") != 0) return std::nullopt;
    const auto index = parse_five_digits(tail.substr(1, 5));
    const auto count = parse_five_digits(tail.substr(10, 5));
    if (!index || !count || *index < 1 || *index > *count) return std::nullopt;
    return SplitName{s.substr(0, s.size() - kSuffix), *index, *count};
}

std::filesystem::path split_part_path(const std::string& prefix, int index, int count) {
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), "-%05d-of-%05d.gguf", index, count);
    return prefix + suffix;
}

}  // namespace minfer
