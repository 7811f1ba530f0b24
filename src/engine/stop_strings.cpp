#include "engine/stop_strings.h"

#include <algorithm>

namespace minfer {

std::string StopStringFilter::push(std::string_view text) {
    if (matched_) return "";
    held_ += text;
    // The earliest complete stop string wins.
    std::size_t first = std::string::npos;
    for (const auto& s : stops_) {
        if (s.empty()) continue;
        const std::size_t at = held_.find(s);
        if (at < first) {
            first = at;
            matched_string_ = s;
        }
    }
    if (first != std::string::npos) {
        matched_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    // Keep the longest tail that is a proper prefix of some stop string.
    std::size_t keep = 0;
    for (const auto& s : stops_) {
        for (std::size_t n = std::min(s.size() - (s.empty() ? 0 : 1), held_.size()); n > keep;
             --n) {
            if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
                keep = n;
                break;
            }
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopStringFilter::flush() {
    std::string out;
    if (!matched_) out.swap(held_);
    held_.clear();
    return out;
}

}  // namespace minfer
