#pragma once
// Names of split models: PREFIX-0000X-of-0000Y.gguf, exactly five digits each, 1 <= X <= Y.

#include <filesystem>
#include <optional>
#include <string>

namespace minfer {

struct SplitName {
    std::string prefix;  // path without "-0000X-of-0000Y.gguf"
    int index = 1;       // X, 1-based
    int count = 1;       // Y
};

std::optional<SplitName> parse_split_name(const std::filesystem::path& path);

// PREFIX-0000X-of-0000Y.gguf for a 1-based part index.
std::filesystem::path split_part_path(const std::string& prefix, int index, int count);

}  // namespace minfer
