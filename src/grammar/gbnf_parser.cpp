// GBNF, as llama.cpp's grammar parser reads it: a rule is `name ::= alternatives` and ends at the
// end of its line, except inside parentheses and after `|`, where lines may break. Rule names are
// letters, digits, '-' (and '_'). Escapes in literals and classes: \xHH, \uHHHH, \UHHHHHHHH,
// \t \n \r, and a backslash before any other punctuation stands for that character.

#include <map>
#include <optional>

#include "core/error.h"
#include "core/hex_escape.h"
#include "core/utf8.h"
#include "grammar/grammar.h"

namespace minfer::grammar {
namespace {

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

class Parser {
  public:
    explicit Parser(std::string_view text) : s_(text) {}

    Grammar parse() {
        if (s_.size() > kMaxGrammarBytes)
            throw UsageError(concat("grammar: the text is ", s_.size(), " bytes, more than the ",
                                    kMaxGrammarBytes, " allowed"));
        if (!is_valid_utf8(s_)) {
            std::size_t i = 0;
            char32_t cp = 0;
            while (i < s_.size()) {
                const std::size_t n = decode_utf8(s_, i, cp);
                if (n == 0) break;
                i += n;
            }
            pos_ = i;
            fail("the grammar is not valid UTF-8");
        }
        skip_space(true);
        while (pos_ < s_.size()) {
            parse_rule();
            skip_space(true);
        }
        resolve_references();
        g_.root = g_.find("root");
        if (g_.root < 0) {
            pos_ = s_.size();
            fail("the grammar has no 'root' rule (the rule generation starts from)");
        }
        return std::move(g_);
    }

  private:
    struct Reference {
        std::size_t rule_ref_pos;  // where the name was used, for the error
        std::string name;
    };

    [[noreturn]] void fail(const std::string& what) const { fail_at(pos_, what); }

    [[noreturn]] void fail_at(std::size_t at, const std::string& what) const {
        std::size_t line = 1, column = 1;
        char32_t cp = 0;
        for (std::size_t i = 0; i < at && i < s_.size();) {
            if (s_[i] == '\n') {
                ++line;
                column = 1;
                ++i;
                continue;
            }
            const std::size_t n = decode_utf8(s_, i, cp);
            i += n == 0 ? 1 : n;
            ++column;
        }
        throw UsageError(concat("grammar: line ", line, ", column ", column, ": ", what));
    }

    // What stands at the current position, for "found ..." in messages.
    std::string found() const {
        if (pos_ >= s_.size()) return "the end of the grammar";
        const char c = s_[pos_];
        if (c == '\n' || c == '\r') return "the end of the line";
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return "a control character";
        char32_t cp = 0;
        const std::size_t n = decode_utf8(s_, pos_, cp);
        return concat("'", s_.substr(pos_, n == 0 ? 1 : n), "'");
    }

    bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
    bool at(std::string_view token) const { return s_.substr(pos_, token.size()) == token; }

    // Spaces, tabs and comments; line breaks too when newlines are allowed here.
    void skip_space(bool newlines) {
        while (pos_ < s_.size()) {
            const char c = s_[pos_];
            if (c == ' ' || c == '\t') {
                ++pos_;
            } else if (c == '#') {
                while (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') ++pos_;
            } else if (newlines && (c == '\n' || c == '\r')) {
                ++pos_;
            } else {
                break;
            }
        }
    }

    std::string parse_name() {
        const std::size_t start = pos_;
        while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
        return std::string(s_.substr(start, pos_ - start));
    }

    void parse_rule() {
        const std::size_t start = pos_;
        const std::string name = parse_name();
        if (name.empty()) fail(concat("expected a rule name, found ", found()));
        skip_space(false);
        if (!at("::="))
            fail(concat("expected '::=' after the rule name '", name, "', found ", found()));
        pos_ += 3;
        skip_space(true);
        if (defined_.count(name) != 0)
            fail_at(start, concat("the rule '", name, "' is defined twice"));
        defined_[name] = start;
        Rule rule;
        rule.name = name;
        rule.body = parse_alternatives(false, 0);
        g_.rules.push_back(std::move(rule));
        skip_space(false);
        if (at('\r')) ++pos_;
        if (pos_ < s_.size() && !at('\n'))
            fail(concat("expected the end of the line after the rule '", name, "', found ",
                        found()));
    }

    Expr parse_alternatives(bool nested, int depth) {
        if (depth > kMaxNesting) fail(concat("groups nest deeper than ", kMaxNesting, " levels"));
        std::vector<Expr> alternatives;
        alternatives.push_back(parse_sequence(nested, depth));
        while (at('|')) {
            ++pos_;
            skip_space(true);
            alternatives.push_back(parse_sequence(nested, depth));
        }
        if (alternatives.size() == 1) return std::move(alternatives[0]);
        return Expr::alternation(std::move(alternatives));
    }

    Expr parse_sequence(bool nested, int depth) {
        std::vector<Expr> items;
        while (pos_ < s_.size()) {
            std::optional<Expr> item = parse_item(depth);
            if (!item) break;
            Expr e = std::move(*item);
            // Each postfix wraps the item once more: they count as nesting (`"a"???...`).
            for (int postfixes = 1; parse_postfix(e); ++postfixes) {
                if (depth + postfixes > kMaxNesting)
                    fail(
                        concat("repetitions and groups nest deeper than ", kMaxNesting, " levels"));
            }
            items.push_back(std::move(e));
            skip_space(nested);
        }
        if (items.size() == 1) return std::move(items[0]);
        return Expr::sequence(std::move(items));
    }

    std::optional<Expr> parse_item(int depth) {
        const char c = s_[pos_];
        if (c == '"') return parse_literal();
        if (c == '[') return parse_class();
        if (c == '.') {
            ++pos_;
            return Expr::char_class(normalize({{0, 0x10FFFF}}));
        }
        if (c == '(') {
            const std::size_t open = pos_;
            ++pos_;
            skip_space(true);
            Expr inner = parse_alternatives(true, depth + 1);
            if (!at(')')) {
                if (pos_ >= s_.size()) fail_at(open, "this '(' is never closed");
                fail(concat("expected ')' or '|', found ", found()));
            }
            ++pos_;
            // A group is kept as one item even when it holds one element, so that a postfix
            // applies to the whole group.
            if (inner.kind != Expr::Kind::Sequence) inner = Expr::sequence({std::move(inner)});
            return inner;
        }
        if (is_name_char(c)) {
            const std::size_t start = pos_;
            std::string name = parse_name();
            // Resolved once every rule is known: -2 - the reference's index until then.
            references_.push_back({start, std::move(name)});
            return Expr::rule_ref(-1 - static_cast<int32_t>(references_.size()));
        }
        return std::nullopt;
    }

    bool parse_postfix(Expr& e) {
        if (pos_ >= s_.size()) return false;
        const char c = s_[pos_];
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
            skip_space(false);
            const auto first = parse_count();
            skip_space(false);
            if (at(',')) {
                ++pos_;
                skip_space(false);
                const auto second = parse_count();
                min = first.value_or(0);
                max = second.value_or(Expr::kUnbounded);
            } else {
                if (!first) fail(concat("expected a repetition count after '{', found ", found()));
                min = max = *first;
            }
            skip_space(false);
            if (!at('}')) fail(concat("expected '}' to end the repetition, found ", found()));
            ++pos_;
            if (max != Expr::kUnbounded && max < min)
                fail(concat("the repetition {", min, ",", max,
                            "} has its maximum below its minimum"));
        } else {
            return false;
        }
        e = Expr::repeat(std::move(e), min, max);
        return true;
    }

    std::optional<int32_t> parse_count() {
        if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return std::nullopt;
        int64_t value = 0;
        while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
            value = value * 10 + (s_[pos_] - '0');
            if (value > kMaxRepeat)
                fail(concat("a repetition count above ", kMaxRepeat, " is not allowed"));
            ++pos_;
        }
        return static_cast<int32_t>(value);
    }

    // One code point of a literal or class, with its escapes.
    char32_t parse_char(const char* where) {
        if (pos_ >= s_.size()) fail(concat("the ", where, " is never closed"));
        const char c = s_[pos_];
        if (c == '\n' || c == '\r') fail(concat("the ", where, " is never closed on its line"));
        if (c != '\\') {
            char32_t cp = 0;
            const std::size_t n = decode_utf8(s_, pos_, cp);
            pos_ += n;
            return cp;
        }
        const std::size_t escape = pos_;
        ++pos_;
        if (pos_ >= s_.size()) fail(concat("the ", where, " is never closed"));
        const char e = s_[pos_++];
        const auto hex = [&](int digits) {
            const std::optional<uint32_t> read = read_hex(s_, pos_, digits);
            if (!read)
                fail_at(escape,
                        concat("expected ", digits, " hexadecimal digits after '\\", e, "'"));
            pos_ += static_cast<std::size_t>(digits);
            const char32_t v = *read;
            if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
                fail_at(escape, "the escape is not a Unicode scalar value");
            return v;
        };
        switch (e) {
            case 'x':
                return hex(2);
            case 'u':
                return hex(4);
            case 'U':
                return hex(8);
            case 'n':
                return '\n';
            case 'r':
                return '\r';
            case 't':
                return '\t';
            case '0':
                return 0;
            default:
                break;
        }
        const bool punctuation = (e >= 0x21 && e <= 0x2F) || (e >= 0x3A && e <= 0x40) ||
                                 (e >= 0x5B && e <= 0x60) || (e >= 0x7B && e <= 0x7E);
        if (!punctuation) {
            pos_ = escape;
            fail(concat("unknown escape '\\", s_.substr(escape + 1, 1), "'"));
        }
        return static_cast<char32_t>(e);
    }

    Expr parse_literal() {
        const std::size_t open = pos_;
        ++pos_;
        std::string text;
        while (!at('"')) {
            if (pos_ >= s_.size()) fail_at(open, "this string is never closed");
            append_utf8(text, parse_char("string"));
        }
        ++pos_;
        return Expr::literal(std::move(text));
    }

    Expr parse_class() {
        const std::size_t open = pos_;
        ++pos_;
        const bool negated = at('^');
        if (negated) ++pos_;
        std::vector<CodepointRange> ranges;
        while (!at(']')) {
            if (pos_ >= s_.size()) fail_at(open, "this character class is never closed");
            const char32_t lo = parse_char("character class");
            char32_t hi = lo;
            if (at('-') && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
                ++pos_;
                const std::size_t range_end = pos_;
                hi = parse_char("character class");
                if (hi < lo) fail_at(range_end, "the range ends below where it starts");
            }
            ranges.push_back({lo, hi});
        }
        ++pos_;
        ranges = normalize(std::move(ranges));
        return Expr::char_class(negated ? complement(ranges) : std::move(ranges));
    }

    void resolve_references() {
        std::map<std::string, int32_t, std::less<>> index;
        for (std::size_t i = 0; i < g_.rules.size(); ++i)
            index[g_.rules[i].name] = static_cast<int32_t>(i);
        const auto visit = [&](auto& self, Expr& e) -> void {
            if (e.kind == Expr::Kind::RuleRef && e.rule <= -2) {
                const Reference& r = references_[static_cast<std::size_t>(-2 - e.rule)];
                const auto it = index.find(r.name);
                if (it == index.end())
                    fail_at(r.rule_ref_pos,
                            concat("the rule '", r.name, "' is used but never defined"));
                e.rule = it->second;
            }
            for (Expr& c : e.children) self(self, c);
        };
        for (Rule& r : g_.rules) visit(visit, r.body);
    }

    std::string_view s_;
    std::size_t pos_ = 0;
    Grammar g_;
    std::map<std::string, std::size_t, std::less<>> defined_;
    std::vector<Reference> references_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
    return Parser(text).parse();
}

}  // namespace minfer::grammar
