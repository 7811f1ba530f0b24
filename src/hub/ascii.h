#pragma once
// ASCII case folding for names the protocols compare case-insensitively (HTTP header names,
// ".gguf" endings, quantization tags): std::tolower would follow the locale.

#include <string>
#include <string_view>

namespace minfer::hub {

inline std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

}  // namespace minfer::hub
