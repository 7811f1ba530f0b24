#include "cli/format.h"

#include <cstdio>

namespace minfer::cli {

std::string format_fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
    return buf;
}

std::string format_mib(uint64_t bytes) {
    return format_fixed(static_cast<double>(bytes) / (1024.0 * 1024.0), 1) + " MB";
}

std::string format_count(uint64_t n) {
    const double v = static_cast<double>(n);
    if (n >= 1'000'000'000) return format_fixed(v / 1e9, 2) + "B";
    if (n >= 1'000'000) return format_fixed(v / 1e6, 1) + "M";
    if (n >= 1'000) return format_fixed(v / 1e3, 1) + "K";
    return std::to_string(n);
}

}  // namespace minfer::cli
