#include "jinja/unicode_text.h"

#include <algorithm>

namespace minfer::jinja::unicode {

namespace {

constexpr char32_t kReplacement = 0xFFFD;

// Decodes one code point at text[i]; advances i. An invalid byte (overlong forms and surrogates
// included) gives U+FFFD and advances by one.
char32_t decode_one(std::string_view text, std::size_t& i) {
    char32_t cp = 0;
    const std::size_t length = decode_utf8(text, i, cp);
    i += length == 0 ? 1 : length;
    return length == 0 ? kReplacement : cp;
}

// Simple one-to-one case pairs: [first, last] upper range maps to lower by +delta.
struct CaseRange {
    char32_t first, last;
    int32_t delta;
};
constexpr CaseRange kOffsetRanges[] = {
    {0x41, 0x5A, 32},   {0xC0, 0xD6, 32},     {0xD8, 0xDE, 32},   {0x391, 0x3A1, 32},
    {0x3A3, 0x3AB, 32}, {0x388, 0x38A, 37},   {0x410, 0x42F, 32}, {0x400, 0x40F, 80},
    {0x531, 0x556, 48}, {0xFF21, 0xFF3A, 32}, {0x386, 0x386, 38}, {0x38C, 0x38C, 64},
    {0x38E, 0x38F, 63},
};
// Alternating pairs: even code point upper, next lower (or odd upper when `odd_upper`).
struct PairRange {
    char32_t first, last;
    bool odd_upper;
};
constexpr PairRange kPairRanges[] = {
    {0x100, 0x12F, false}, {0x132, 0x137, false},   {0x139, 0x148, true},    {0x14A, 0x177, false},
    {0x179, 0x17E, true},  {0x460, 0x481, false},   {0x48A, 0x4BF, false},   {0x4C1, 0x4CE, true},
    {0x4D0, 0x52F, false}, {0x1E00, 0x1E95, false}, {0x1EA0, 0x1EFF, false},
};

char32_t simple_lower(char32_t cp) {
    if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
    for (const auto& r : kOffsetRanges)
        if (cp >= r.first && cp <= r.last) return cp + r.delta;
    for (const auto& r : kPairRanges)
        if (cp >= r.first && cp <= r.last && ((cp & 1) == (r.odd_upper ? 1u : 0u))) return cp + 1;
    if (cp == 0x178) return 0xFF;
    return cp;
}

char32_t simple_upper(char32_t cp) {
    if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
    if (cp == 0xFF) return 0x178;
    if (cp == 0xB5) return 0x39C;
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    if (cp == 0x3C2) return 0x3A3;
    for (const auto& r : kOffsetRanges) {
        const char32_t lo = r.first + r.delta, hi = r.last + r.delta;
        if (cp >= lo && cp <= hi) return cp - r.delta;
    }
    for (const auto& r : kPairRanges)
        if (cp > r.first && cp <= r.last && ((cp & 1) == (r.odd_upper ? 0u : 1u))) return cp - 1;
    return cp;
}

void append_upper(std::string& out, char32_t cp) {
    if (cp == 0xDF) {  // ß -> SS, as Python's full case mapping does
        out += "SS";
        return;
    }
    append_utf8(out, simple_upper(cp));
}

void append_lower(std::string& out, char32_t cp) {
    if (cp == 0x130) {  // İ -> i + combining dot above
        out += "i\xCC\x87";
        return;
    }
    append_utf8(out, simple_lower(cp));
}

bool in_chars(char32_t cp, const std::vector<char32_t>& chars) {
    return std::find(chars.begin(), chars.end(), cp) != chars.end();
}

}  // namespace

std::vector<char32_t> decode(std::string_view text) {
    std::vector<char32_t> out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) out.push_back(decode_one(text, i));
    return out;
}

std::string encode(const std::vector<char32_t>& code_points) {
    std::string out;
    out.reserve(code_points.size());
    for (char32_t cp : code_points) append_utf8(out, cp);
    return out;
}

std::size_t length(std::string_view text) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < text.size();) {
        decode_one(text, i);
        ++n;
    }
    return n;
}

bool is_space(char32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_line_break(char32_t cp) {
    return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
           cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

bool is_printable(char32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
    if ((cp >= 0x600 && cp <= 0x605) || cp == 0x61C || cp == 0x6DD || cp == 0x70F) return false;
    if (cp == 0x1680 || cp == 0x180E || (cp >= 0x2000 && cp <= 0x200F)) return false;
    if ((cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x206F) || cp == 0x3000)
        return false;
    if ((cp >= 0xD800 && cp <= 0xF8FF) || cp == 0xFEFF || (cp >= 0xFFF0 && cp <= 0xFFFB))
        return false;
    if (cp == 0xFFFE || cp == 0xFFFF || (cp >= 0xE0000 && cp <= 0xE007F) || cp >= 0xF0000)
        return false;
    return true;
}

bool is_word_char(char32_t cp) {
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    if (cp <= 0xBF)
        return cp == 0xAA || cp == 0xB2 || cp == 0xB3 || cp == 0xB5 || cp == 0xB9 || cp == 0xBA ||
               (cp >= 0xBC && cp <= 0xBE);
    if (cp == 0xD7 || cp == 0xF7 || is_space(cp) || !is_printable(cp)) return false;
    if (cp >= 0x2000 && cp <= 0x2BFF) return false;  // punctuation, symbols, arrows, box drawing
    if (cp >= 0x3000 && cp <= 0x3004) return false;  // CJK punctuation
    if (cp >= 0x3008 && cp <= 0x3020) return false;
    if ((cp >= 0xFF00 && cp <= 0xFF0F) || (cp >= 0xFF1A && cp <= 0xFF20) ||
        (cp >= 0xFF3B && cp <= 0xFF40) || (cp >= 0xFF5B && cp <= 0xFF65))
        return false;
    if (cp >= 0x1F000 && cp <= 0x1FAFF) return false;  // emoji and pictographs
    return true;
}

bool is_cased(char32_t cp) {
    return simple_upper(cp) != cp || simple_lower(cp) != cp || cp == 0xDF || cp == 0x130;
}

std::string to_upper(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) append_upper(out, decode_one(text, i));
    return out;
}

std::string to_lower(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) append_lower(out, decode_one(text, i));
    return out;
}

std::string capitalize(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    bool first = true;
    for (std::size_t i = 0; i < text.size();) {
        const char32_t cp = decode_one(text, i);
        if (first)
            append_upper(out, cp);
        else
            append_lower(out, cp);
        first = false;
    }
    return out;
}

std::string python_title(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    bool previous_cased = false;
    for (std::size_t i = 0; i < text.size();) {
        const char32_t cp = decode_one(text, i);
        if (previous_cased)
            append_lower(out, cp);
        else
            append_upper(out, cp);
        previous_cased = is_cased(cp);
    }
    return out;
}

std::string strip(std::string_view text, const std::string* chars, bool left, bool right) {
    const std::vector<char32_t> cps = decode(text);
    const std::vector<char32_t> set = chars ? decode(*chars) : std::vector<char32_t>{};
    const auto strippable = [&](char32_t cp) { return chars ? in_chars(cp, set) : is_space(cp); };
    std::size_t begin = 0, end = cps.size();
    if (left)
        while (begin < end && strippable(cps[begin])) ++begin;
    if (right)
        while (end > begin && strippable(cps[end - 1])) --end;
    return encode(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(begin),
                                        cps.begin() + static_cast<std::ptrdiff_t>(end)));
}

std::vector<std::string> split_lines(std::string_view text) {
    std::vector<std::string> lines;
    const std::vector<char32_t> cps = decode(text);
    std::vector<char32_t> current;
    for (std::size_t i = 0; i < cps.size(); ++i) {
        if (!is_line_break(cps[i])) {
            current.push_back(cps[i]);
            continue;
        }
        if (cps[i] == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
        lines.push_back(encode(current));
        current.clear();
    }
    if (!current.empty()) lines.push_back(encode(current));
    return lines;
}

}  // namespace minfer::jinja::unicode
