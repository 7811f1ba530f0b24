#include "server/keep_alive.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "server/request_fields.h"

namespace minfer::server {
namespace {

constexpr double kMostMillis = 10.0 * 365 * 24 * 3600 * 1000;  // ten years

std::optional<std::chrono::milliseconds> from_millis(double ms) {
    if (!std::isfinite(ms)) return std::nullopt;
    if (ms < 0) return std::chrono::milliseconds(-1);
    if (ms > kMostMillis) return std::nullopt;
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

}  // namespace

std::optional<std::chrono::milliseconds> parse_keep_alive(std::string_view text) {
    if (text.empty() || text.size() > 64) return std::nullopt;
    const std::string s(text);
    // A bare number: seconds.
    char* end = nullptr;
    const double seconds = std::strtod(s.c_str(), &end);
    if (end != s.c_str() && *end == '\0') return from_millis(seconds * 1000);
    // A Go duration: [-]NUMBER UNIT [NUMBER UNIT ...], units h, m, s, ms, us, µs, ns.
    std::size_t i = 0;
    const bool negative = s[0] == '-';
    if (s[0] == '-' || s[0] == '+') ++i;
    if (i == s.size()) return std::nullopt;
    double total_ms = 0;
    while (i < s.size()) {
        const char* start = s.c_str() + i;
        const double v = std::strtod(start, &end);
        if (end == start || *start == '-' || *start == '+' || !std::isfinite(v)) return std::nullopt;
        i += static_cast<std::size_t>(end - start);
        const std::string_view rest = std::string_view(s).substr(i);
        struct Unit {
            std::string_view name;
            double ms;
        };
        constexpr Unit kUnits[] = {{"ms", 1},       {"us", 1e-3}, {"\xC2\xB5s", 1e-3},
                                   {"ns", 1e-6},    {"h", 3.6e6}, {"m", 6e4},
                                   {"s", 1e3}};
        const Unit* unit = nullptr;
        for (const Unit& u : kUnits) {
            if (rest.starts_with(u.name)) {
                unit = &u;
                break;
            }
        }
        if (unit == nullptr) return std::nullopt;
        i += unit->name.size();
        total_ms += v * unit->ms;
        if (total_ms > kMostMillis) return std::nullopt;
    }
    return from_millis(negative ? -total_ms : total_ms);
}

std::chrono::milliseconds keep_alive_from_json(const nlohmann::ordered_json& value) {
    std::optional<std::chrono::milliseconds> d;
    if (value.is_number()) d = from_millis(value.get<double>() * 1000);
    if (value.is_string()) d = parse_keep_alive(value.get<std::string>());
    if (!d) {
        bad_field("keep_alive",
                  "'keep_alive' must be a duration (\"5m\", \"1h\", \"-1\" to keep the model "
                  "loaded) or a number of seconds");
    }
    return *d;
}

}  // namespace minfer::server
