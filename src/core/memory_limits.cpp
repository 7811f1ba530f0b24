#include "core/memory_limits.h"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace minfer {
namespace {

// Above this a limit means "unlimited" (cgroup v1 writes 2^63 rounded down to a page).
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

std::optional<uint64_t> read_number_file(const std::string& path) {
    std::ifstream in(path);
    std::string text;
    if (!(in >> text) || text == "max") return std::nullopt;
    try {
        std::size_t used = 0;
        const unsigned long long v = std::stoull(text, &used);
        if (used != text.size() || v >= kUnlimited) return std::nullopt;
        return v;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

// The value in kB of a "Key:   N kB" line of /proc/meminfo or /proc/self/status, in bytes.
std::optional<uint64_t> read_kb_field(const char* path, std::string_view key) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.compare(0, key.size(), key) != 0 || line.size() <= key.size() ||
            line[key.size()] != ':')
            continue;
        std::istringstream fields(line.substr(key.size() + 1));
        uint64_t kb = 0;
        if (fields >> kb) return kb * 1024;
    }
    return std::nullopt;
}

// The cgroup path of this process for controller `controller` ("" for cgroup v2's line "0::").
std::optional<std::string> cgroup_path(std::string_view controller) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
        const auto first = line.find(':');
        const auto second = line.find(':', first + 1);
        if (first == std::string::npos || second == std::string::npos) continue;
        const std::string_view controllers =
            std::string_view(line).substr(first + 1, second - first - 1);
        if (controllers == controller) return line.substr(second + 1);
    }
    return std::nullopt;
}

// Limit minus usage of the first cgroup directory (the process's own, then the mount's root
// as seen from inside a container) that has a limit.
std::optional<uint64_t> cgroup_headroom() {
    struct Files {
        std::string root, controller, limit, usage;
    };
    const Files versions[] = {
        {"/sys/fs/cgroup", "", "memory.max", "memory.current"},
        {"/sys/fs/cgroup/memory", "memory", "memory.limit_in_bytes", "memory.usage_in_bytes"},
    };
    for (const Files& v : versions) {
        std::string dirs[2] = {v.root, v.root};
        if (auto path = cgroup_path(v.controller); path && *path != "/") dirs[0] = v.root + *path;
        for (const std::string& dir : dirs) {
            const auto limit = read_number_file(dir + "/" + v.limit);
            if (!limit) continue;
            const uint64_t usage = read_number_file(dir + "/" + v.usage).value_or(0);
            return *limit > usage ? *limit - usage : 0;
        }
    }
    return std::nullopt;
}

std::optional<uint64_t> address_space_headroom() {
    struct rlimit limit {};
    if (getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
    const uint64_t mapped = read_kb_field("/proc/self/status", "VmSize").value_or(0);
    return limit.rlim_cur > mapped ? limit.rlim_cur - mapped : 0;
}

}  // namespace

std::optional<MemoryHeadroom> memory_headroom() {
    std::optional<MemoryHeadroom> best;
    const auto consider = [&](std::optional<uint64_t> bytes, const char* name) {
        if (bytes && (!best || *bytes < best->bytes)) best = MemoryHeadroom{*bytes, name};
    };
    consider(read_kb_field("/proc/meminfo", "MemAvailable"), "MemAvailable");
    consider(cgroup_headroom(), "the cgroup's memory limit");
    consider(address_space_headroom(), "RLIMIT_AS (ulimit -v)");
    return best;
}

std::optional<uint64_t> peak_resident_bytes() {
    return read_kb_field("/proc/self/status", "VmHWM");
}

bool reset_peak_resident() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";  // proc(5): "reset the peak resident set size"
    clear.flush();
    return static_cast<bool>(clear);
}

void require_memory(uint64_t bytes, std::string_view what, std::string_view advice) {
    const auto headroom = memory_headroom();
    if (!headroom || bytes <= headroom->bytes) return;
    throw LimitError(concat(what, " needs ", format_bytes(bytes), ", but only ",
                            format_bytes(headroom->bytes), " are available (limited by ",
                            headroom->limited_by, ")", advice));
}

std::string format_bytes(uint64_t bytes) {
    const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024.0 && unit < 4) {
        value /= 1024.0;
        ++unit;
    }
    char text[32];
    if (unit == 0) {
        std::snprintf(text, sizeof(text), "%llu bytes", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(text, sizeof(text), "%.1f %s", value, units[unit]);
    }
    return text;
}

}  // namespace minfer
