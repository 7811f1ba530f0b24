#include "grammar/json_schema_parts.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"

namespace minfer::grammar::json_parts {
namespace {

// GBNF alternatives "a | b | c" (each parenthesized when asked).
std::string join_alternatives(const std::vector<std::string>& parts, bool parenthesize = false) {
    std::string out;
    for (const std::string& p : parts) {
        if (!out.empty()) out += " | ";
        if (parenthesize) out += '(';
        out += p;
        if (parenthesize) out += ')';
    }
    return out;
}

struct Builtin {
    const char* body;
    std::vector<std::string> uses;
};

// Bounded where JSON is not, so that every value can end: at most 16 digits before the point, 16
// after it, 3 in the exponent, and whitespace of one newline and 20 spaces or tabs. Values carry
// no whitespace of their own: containers put it around their members, so a finished top-level
// value ends the text.
const std::map<std::string, Builtin>& builtins() {
    static const std::map<std::string, Builtin> table = {
        {"ws", {R"(| " " | "\n" [ \t]{0,20})", {}}},
        // \u escapes of surrogates are left out: a pair would count as two characters here but
        // one code point for a validator (minLength), and a lone one is no character at all.
        {"char",
         {R"([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" ([0-9a-cA-Ce-fE-F] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2})))",
          {}}},
        {"string", {R"("\"" char* "\"")", {"char"}}},
        {"integer", {R"("-"? ([0-9] | [1-9] [0-9]{1,15}))", {}}},
        {"number",
         {R"("-"? ([0-9] | [1-9] [0-9]{1,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})?)", {}}},
        {"boolean", {R"("true" | "false")", {}}},
        {"null", {R"("null")", {}}},
        {"value",
         {"object | array | string | number | boolean | null",
          {"object", "array", "string", "number", "boolean", "null"}}},
        {"object",
         {R"("{" ws (string ws ":" ws value ws ("," ws string ws ":" ws value ws)*)? "}")",
          {"ws", "string", "value"}}},
        {"array", {R"("[" ws (value ws ("," ws value ws)*)? "]")", {"ws", "value"}}},
        // Days that exist in every year (29 February only in some: left out).
        {"date",
         {R"([0-9]{4} "-" (("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01]) | ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30") | "02" "-" ("0" [1-9] | "1" [0-9] | "2" [0-8])))",
          {}}},
        {"time",
         {R"(([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9]))",
          {}}},
        {"date-time", {R"(date "T" time)", {"date", "time"}}},
        {"uuid",
         {R"([0-9a-f]{8} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{4} "-" [0-9a-f]{12})", {}}},
    };
    return table;
}

// Fixed-width decimal strings x..y (same length, leading zeros allowed inside).
std::string same_length(const std::string& x, const std::string& y) {
    const std::size_t n = x.size();
    if (n == 0) return "";
    if (x == y) return "\"" + x + "\"";
    if (n == 1) return std::string("[") + x[0] + "-" + y[0] + "]";
    const std::string rest_x = x.substr(1), rest_y = y.substr(1);
    if (x[0] == y[0])
        return "\"" + std::string(1, x[0]) + "\" (" + same_length(rest_x, rest_y) + ")";
    const bool low_full = rest_x.find_first_not_of('0') == std::string::npos;
    const bool high_full = rest_y.find_first_not_of('9') == std::string::npos;
    std::vector<std::string> parts;
    if (!low_full)
        parts.push_back("\"" + std::string(1, x[0]) + "\" (" +
                        same_length(rest_x, std::string(n - 1, '9')) + ")");
    const char first = static_cast<char>(low_full ? x[0] : x[0] + 1);
    const char last = static_cast<char>(high_full ? y[0] : y[0] - 1);
    if (first <= last) {
        const std::string digit = first == last ? "\"" + std::string(1, first) + "\""
                                                : std::string("[") + first + "-" + last + "]";
        parts.push_back(digit + " [0-9]{" + std::to_string(n - 1) + "}");
    }
    if (!high_full)
        parts.push_back("\"" + std::string(1, y[0]) + "\" (" +
                        same_length(std::string(n - 1, '0'), rest_y) + ")");
    return join_alternatives(parts);
}

// Non-negative integers lo..hi without leading zeros.
std::string non_negative(uint64_t lo, uint64_t hi) {
    std::vector<std::string> parts;
    const std::string high = std::to_string(hi);
    for (std::size_t digits = std::to_string(lo).size(); digits <= high.size(); ++digits) {
        uint64_t first = 1;
        for (std::size_t i = 1; i < digits; ++i) first *= 10;
        const uint64_t a = std::max(lo, digits == 1 ? 0 : first);
        const uint64_t b = digits == high.size() ? hi : first * 10 - 1;
        if (a > b) continue;
        parts.push_back("(" + same_length(std::to_string(a), std::to_string(b)) + ")");
    }
    return join_alternatives(parts);
}

constexpr uint64_t kLargestMagnitude = 9999999999999999;  // 16 digits
const std::string kAnyFraction = "(\".\" [0-9]{1,16})?";
const std::string kZeroFraction = "(\".\" \"0\"{1,16})?";
const std::string kNonzeroFraction = "\".\" [0-9]{0,15} [1-9]";

// Numbers m >= 0 written "I" or "I.F", with lo <= m <= hi (either bound possibly exclusive,
// lo >= 0). Integer bounds are kept exactly; inside a non-integer bound, the numbers up to the
// nearest integer are left out.
std::string magnitudes(NumberBound lo, std::optional<NumberBound> hi) {
    std::vector<std::string> parts;
    const bool lo_integer = lo.value == std::floor(lo.value);
    // Integer parts whose every fraction is inside: [full_lo, full_hi].
    uint64_t full_lo = static_cast<uint64_t>(std::ceil(lo.value));
    if (lo_integer && lo.exclusive) {
        parts.push_back("\"" + std::to_string(full_lo) + "\" " + kNonzeroFraction);
        ++full_lo;
    }
    int64_t full_hi = static_cast<int64_t>(kLargestMagnitude);
    if (hi) {
        const double top = std::floor(hi->value);
        full_hi = static_cast<int64_t>(top) - 1;  // I = floor(hi) may exceed hi with a fraction
        if (top == hi->value && !hi->exclusive && hi->value >= static_cast<double>(full_lo))
            parts.push_back("\"" + std::to_string(static_cast<uint64_t>(top)) + "\" " +
                            kZeroFraction);
    }
    if (full_hi >= 0 && static_cast<uint64_t>(full_hi) >= full_lo)
        parts.push_back("(" + non_negative(full_lo, static_cast<uint64_t>(full_hi)) + ") " +
                        kAnyFraction);
    return join_alternatives(parts);
}

}  // namespace

std::string number_range(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
    std::vector<std::string> parts;
    // Zero and up.
    if (!hi || hi->value >= 0) {
        NumberBound from{0, false};
        if (lo && lo->value >= 0) from = *lo;
        const std::string m = magnitudes(from, hi);
        if (!m.empty()) parts.push_back(m);
    }
    // Below zero: "-" and a magnitude within [-hi, -lo], never zero.
    if (!lo || lo->value < 0) {
        NumberBound from{0, true};
        if (hi && hi->value < 0) from = {-hi->value, hi->exclusive};
        std::optional<NumberBound> to;
        if (lo) to = NumberBound{-lo->value, lo->exclusive};
        const std::string m = magnitudes(from, to);
        if (!m.empty()) parts.push_back("\"-\" (" + m + ")");
    }
    return join_alternatives(parts, /*parenthesize=*/true);
}

std::string builtin_rule(const std::string& name) {
    return name + " ::= " + builtins().at(name).body;
}

std::vector<std::string> builtin_dependencies(const std::string& name) {
    return builtins().at(name).uses;
}

bool is_format(const std::string& name) {
    return name == "date" || name == "time" || name == "date-time" || name == "uuid";
}

std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    constexpr int64_t kLargest = 9999999999999999;  // 16 digits
    const int64_t a = lo.value_or(hi ? std::min(-kLargest, *hi) : -kLargest);
    const int64_t b = hi.value_or(std::max(kLargest, a));
    if (a > b) throw UsageError("json schema: no integer lies within the bounds");
    std::vector<std::string> parts;
    if (a < 0) {
        const auto magnitude_lo = b < 0 ? static_cast<uint64_t>(-b) : uint64_t{1};
        const auto magnitude_hi = static_cast<uint64_t>(-(a + 1)) + 1;
        parts.push_back("\"-\" (" + non_negative(magnitude_lo, magnitude_hi) + ")");
    }
    if (b >= 0)
        parts.push_back(
            non_negative(static_cast<uint64_t>(std::max<int64_t>(a, 0)), static_cast<uint64_t>(b)));
    return join_alternatives(parts);
}

}  // namespace minfer::grammar::json_parts
