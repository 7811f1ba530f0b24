#include "grammar/regex_pattern.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.h"
#include "core/hex_escape.h"
#include "core/utf8.h"

namespace minfer::grammar {
namespace {

using Ranges = std::vector<CodepointRange>;

const Ranges& digit_class() {
    static const Ranges r{{'0', '9'}};
    return r;
}
const Ranges& word_class() {
    static const Ranges r = normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
    return r;
}
// ECMAScript's \s: white space and line terminators.
const Ranges& space_class() {
    static const Ranges r = normalize({{0x09, 0x0D},
                                       {0x20, 0x20},
                                       {0xA0, 0xA0},
                                       {0x1680, 0x1680},
                                       {0x2000, 0x200A},
                                       {0x2028, 0x2029},
                                       {0x202F, 0x202F},
                                       {0x205F, 0x205F},
                                       {0x3000, 0x3000},
                                       {0xFEFF, 0xFEFF}});
    return r;
}
// `.`: anything but a line terminator.
const Ranges& dot_class() {
    static const Ranges r = complement(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    return r;
}
const Ranges& any_class() {
    static const Ranges r = normalize({{0, 0x10FFFF}});
    return r;
}

class RegexParser {
  public:
    explicit RegexParser(std::string_view p) : p_(p) {}

    Expr parse() {
        if (p_.size() > kMaxPatternBytes)
            throw UsageError(concat("pattern: ", p_.size(), " bytes, more than the ",
                                    kMaxPatternBytes, " allowed"));
        if (!is_valid_utf8(p_)) throw UsageError("pattern: not valid UTF-8");
        const bool anchored_start = !p_.empty() && p_[0] == '^';
        if (anchored_start) ++pos_;
        Expr body = parse_alternation(0);
        const bool anchored_end = pos_ < p_.size() && p_[pos_] == '$';
        if (anchored_end) ++pos_;
        if (pos_ < p_.size()) {
            if (p_[pos_] == ')') fail("an unmatched ')'");
            fail("'^' and '$' are supported only at the start and end of the whole pattern");
        }
        // A pattern is a search: unanchored ends may have any text around the match.
        std::vector<Expr> parts;
        if (!anchored_start) parts.push_back(Expr::repeat(Expr::char_class(any_class()), 0, -1));
        parts.push_back(std::move(body));
        if (!anchored_end) parts.push_back(Expr::repeat(Expr::char_class(any_class()), 0, -1));
        return parts.size() == 1 ? std::move(parts[0]) : Expr::sequence(std::move(parts));
    }

  private:
    [[noreturn]] void fail(const std::string& what) const {
        throw UsageError(concat("pattern: ", what, " at offset ", pos_, " of '", p_, "'"));
    }

    bool at_end() const { return pos_ >= p_.size(); }
    char peek() const { return p_[pos_]; }

    Expr parse_alternation(int depth) {
        if (depth > kMaxNesting) fail(concat("groups nest deeper than ", kMaxNesting, " levels"));
        std::vector<Expr> alternatives;
        alternatives.push_back(parse_sequence(depth));
        while (!at_end() && peek() == '|') {
            ++pos_;
            alternatives.push_back(parse_sequence(depth));
        }
        return alternatives.size() == 1 ? std::move(alternatives[0])
                                        : Expr::alternation(std::move(alternatives));
    }

    Expr parse_sequence(int depth) {
        std::vector<Expr> items;
        while (!at_end()) {
            const char c = peek();
            if (c == '|' || c == ')') break;
            if (c == '$' && depth == 0 && pos_ + 1 == p_.size()) break;  // the closing anchor
            Expr atom = parse_atom(depth);
            parse_quantifiers(atom);
            items.push_back(std::move(atom));
        }
        return items.size() == 1 ? std::move(items[0]) : Expr::sequence(std::move(items));
    }

    Expr parse_atom(int depth) {
        const char c = peek();
        switch (c) {
            case '^':
            case '$':
                fail("'^' and '$' are supported only at the start and end of the whole pattern");
            case '*':
            case '+':
            case '?':
            case '{':
                fail(concat("'", c, "' has nothing to repeat"));
            case '.':
                ++pos_;
                return Expr::char_class(dot_class());
            case '[':
                return Expr::char_class(parse_class());
            case '(':
                return parse_group(depth);
            case '\\':
                return parse_escape_atom();
            default: {
                char32_t cp = 0;
                pos_ += decode_utf8(p_, pos_, cp);
                std::string text;
                append_utf8(text, cp);
                return Expr::literal(std::move(text));
            }
        }
    }

    Expr parse_group(int depth) {
        ++pos_;  // (
        if (p_.substr(pos_, 2) == "?=" || p_.substr(pos_, 2) == "?!" ||
            p_.substr(pos_, 3) == "?<=" || p_.substr(pos_, 3) == "?<!")
            fail("lookaround assertions are not supported");
        if (p_.substr(pos_, 2) == "?:") {
            pos_ += 2;
        } else if (p_.substr(pos_, 2) == "?<") {
            const auto close = p_.find('>', pos_);
            if (close == std::string_view::npos) fail("a group name that is never closed");
            pos_ = close + 1;
        } else if (!at_end() && peek() == '?') {
            fail("this kind of group is not supported");
        }
        Expr inner = parse_alternation(depth + 1);
        if (at_end() || peek() != ')') fail("a '(' that is never closed");
        ++pos_;
        return inner.kind == Expr::Kind::Sequence ? std::move(inner)
                                                  : Expr::sequence({std::move(inner)});
    }

    // One quantifier, lazy or not (ECMAScript refuses a second: `a**`).
    void parse_quantifiers(Expr& atom) {
        for (bool quantified = false; !at_end(); quantified = true) {
            const std::size_t start = pos_;
            const char c = peek();
            int32_t min = 0, max = Expr::kUnbounded;
            if (c == '*') {
                ++pos_;
            } else if (c == '+') {
                ++pos_;
                min = 1;
            } else if (c == '?') {
                ++pos_;
                max = 1;
            } else if (c == '{') {
                ++pos_;
                min = parse_count();
                max = min;
                if (!at_end() && peek() == ',') {
                    ++pos_;
                    max = !at_end() && peek() == '}' ? Expr::kUnbounded : parse_count();
                }
                if (at_end() || peek() != '}') fail("a repetition that is never closed");
                ++pos_;
                if (max != Expr::kUnbounded && max < min)
                    fail("a repetition whose maximum is below its minimum");
            } else {
                return;
            }
            if (quantified) {
                pos_ = start;
                fail(concat("'", c, "' has nothing to repeat"));
            }
            if (!at_end() && peek() == '?') ++pos_;  // lazy: the same strings
            atom = Expr::repeat(std::move(atom), min, max);
        }
    }

    int32_t parse_count() {
        if (at_end() || peek() < '0' || peek() > '9') fail("expected a repetition count");
        int64_t v = 0;
        while (!at_end() && peek() >= '0' && peek() <= '9') {
            v = v * 10 + (peek() - '0');
            if (v > kMaxRepeat) fail(concat("a repetition count above ", kMaxRepeat));
            ++pos_;
        }
        return static_cast<int32_t>(v);
    }

    char32_t parse_hex(int digits) {
        const std::optional<uint32_t> v = read_hex(p_, pos_, digits);
        if (!v) fail(concat("expected ", digits, " hexadecimal digits"));
        pos_ += static_cast<std::size_t>(digits);
        return *v;
    }

    // After a backslash: a class escape (\d ...) fills `ranges` and returns true; a character
    // escape sets `cp` and returns false.
    bool parse_escape(char32_t& cp, Ranges& ranges, bool in_class) {
        if (at_end()) fail("a pattern that ends with a backslash");
        const char e = p_[pos_++];
        switch (e) {
            case 'd':
                ranges = digit_class();
                return true;
            case 'D':
                ranges = complement(digit_class());
                return true;
            case 'w':
                ranges = word_class();
                return true;
            case 'W':
                ranges = complement(word_class());
                return true;
            case 's':
                ranges = space_class();
                return true;
            case 'S':
                ranges = complement(space_class());
                return true;
            case 'n':
                cp = '\n';
                return false;
            case 'r':
                cp = '\r';
                return false;
            case 't':
                cp = '\t';
                return false;
            case 'v':
                cp = '\v';
                return false;
            case 'f':
                cp = '\f';
                return false;
            case '0':
                cp = 0;
                return false;
            case 'x':
                cp = parse_hex(2);
                return false;
            case 'c': {
                if (at_end() || !std::isalpha(static_cast<unsigned char>(peek())))
                    fail("expected a letter after \\c");
                cp = static_cast<char32_t>(peek() % 32);
                ++pos_;
                return false;
            }
            case 'u':
                if (!at_end() && peek() == '{') {
                    ++pos_;
                    cp = 0;
                    int n = 0;
                    while (!at_end() && peek() != '}') {
                        const int d = hex_digit_value(peek());
                        if (d < 0 || ++n > 6) fail("a bad \\u{...} escape");
                        cp = cp * 16 + static_cast<char32_t>(d);
                        ++pos_;
                    }
                    if (at_end() || n == 0) fail("a bad \\u{...} escape");
                    ++pos_;
                } else {
                    cp = parse_hex(4);
                }
                if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                    fail("an escape that is not a Unicode scalar value");
                return false;
            case 'b':
                if (in_class) {
                    cp = '\b';
                    return false;
                }
                fail("word boundaries (\\b) are not supported");
            case 'B':
                fail("word boundaries (\\B) are not supported");
            case 'p':
            case 'P':
                fail("Unicode property escapes (\\p{...}) are not supported");
            case 'k':
                fail("backreferences are not supported");
            default:
                break;
        }
        if (e >= '1' && e <= '9') fail("backreferences are not supported");
        const bool syntax = std::string_view("^$\\.*+?()[]{}|/-").find(e) != std::string_view::npos;
        if (!syntax) fail(concat("an unknown escape '\\", e, "'"));
        cp = static_cast<char32_t>(e);
        return false;
    }

    Expr parse_escape_atom() {
        ++pos_;  // backslash
        char32_t cp = 0;
        Ranges ranges;
        if (parse_escape(cp, ranges, false)) return Expr::char_class(std::move(ranges));
        std::string text;
        append_utf8(text, cp);
        return Expr::literal(std::move(text));
    }

    // One member of a class: a character (cp) or a class escape (ranges).
    bool parse_class_atom(char32_t& cp, Ranges& ranges) {
        if (peek() == '\\') {
            ++pos_;
            return parse_escape(cp, ranges, true);
        }
        pos_ += decode_utf8(p_, pos_, cp);
        return false;
    }

    Ranges parse_class() {
        ++pos_;  // [
        const bool negated = !at_end() && peek() == '^';
        if (negated) ++pos_;
        Ranges members;
        while (true) {
            if (at_end()) fail("a '[' that is never closed");
            if (peek() == ']') break;
            char32_t lo = 0;
            Ranges escaped;
            if (parse_class_atom(lo, escaped)) {
                members.insert(members.end(), escaped.begin(), escaped.end());
                continue;
            }
            if (pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') {
                ++pos_;
                char32_t hi = 0;
                if (parse_class_atom(hi, escaped)) fail("a range that ends in a class escape");
                if (hi < lo) fail("a range that ends below where it starts");
                members.push_back({lo, hi});
            } else {
                members.push_back({lo, lo});
            }
        }
        ++pos_;  // ]
        members = normalize(std::move(members));
        return negated ? complement(members) : members;
    }

    std::string_view p_;
    std::size_t pos_ = 0;
};

// The JSON encoding of one code point inside a string.
std::string json_encoded(char32_t cp) {
    switch (cp) {
        case '"':
            return "\\\"";
        case '\\':
            return "\\\\";
        case '\b':
            return "\\b";
        case '\f':
            return "\\f";
        case '\n':
            return "\\n";
        case '\r':
            return "\\r";
        case '\t':
            return "\\t";
        default:
            break;
    }
    std::string out;
    if (cp < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
        out = buf;
    } else {
        append_utf8(out, cp);
    }
    return out;
}

// Characters JSON must escape inside strings.
const Ranges& json_escaped_chars() {
    static const Ranges r = normalize({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    return r;
}

Ranges intersect(const Ranges& a, const Ranges& b) {
    Ranges out;
    for (const auto& x : a) {
        for (const auto& y : b) {
            const char32_t lo = std::max(x.lo, y.lo), hi = std::min(x.hi, y.hi);
            if (lo <= hi) out.push_back({lo, hi});
        }
    }
    return normalize(std::move(out));
}

// Rewrites an expression over characters into one over their JSON string encodings.
Expr json_escape(Expr e) {
    switch (e.kind) {
        case Expr::Kind::Literal: {
            std::string text;
            char32_t cp = 0;
            for (std::size_t i = 0; i < e.text.size();) {
                i += decode_utf8(e.text, i, cp);
                text += json_encoded(cp);
            }
            e.text = std::move(text);
            return e;
        }
        case Expr::Kind::CharClass: {
            const Ranges specials = intersect(e.ranges, json_escaped_chars());
            if (specials.empty()) return e;
            std::vector<Expr> alternatives;
            Ranges plain = intersect(e.ranges, complement(json_escaped_chars()));
            if (!plain.empty()) alternatives.push_back(Expr::char_class(std::move(plain)));
            for (const auto& r : specials) {
                for (char32_t cp = r.lo; cp <= r.hi; ++cp)
                    alternatives.push_back(Expr::literal(json_encoded(cp)));
            }
            return alternatives.size() == 1 ? std::move(alternatives[0])
                                            : Expr::alternation(std::move(alternatives));
        }
        default:
            for (Expr& c : e.children) c = json_escape(std::move(c));
            return e;
    }
}

}  // namespace

Expr regex_to_expr(std::string_view pattern, bool json_escaped) {
    Expr e = RegexParser(pattern).parse();
    return json_escaped ? json_escape(std::move(e)) : e;
}

}  // namespace minfer::grammar
