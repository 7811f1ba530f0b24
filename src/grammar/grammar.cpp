#include "grammar/grammar.h"

#include <algorithm>

#include "core/error.h"
#include "core/hex_escape.h"
#include "core/utf8.h"

namespace minfer::grammar {

Expr Expr::literal(std::string text) {
    Expr e;
    e.kind = Kind::Literal;
    e.text = std::move(text);
    return e;
}

Expr Expr::char_class(std::vector<CodepointRange> ranges) {
    Expr e;
    e.kind = Kind::CharClass;
    e.ranges = std::move(ranges);
    return e;
}

Expr Expr::rule_ref(int32_t rule) {
    Expr e;
    e.kind = Kind::RuleRef;
    e.rule = rule;
    return e;
}

Expr Expr::sequence(std::vector<Expr> children) {
    Expr e;
    e.kind = Kind::Sequence;
    e.children = std::move(children);
    return e;
}

Expr Expr::alternation(std::vector<Expr> children) {
    Expr e;
    e.kind = Kind::Alternation;
    e.children = std::move(children);
    return e;
}

Expr Expr::repeat(Expr child, int32_t min, int32_t max) {
    Expr e;
    e.kind = Kind::Repeat;
    e.children.push_back(std::move(child));
    e.min = min;
    e.max = max;
    return e;
}

int32_t Grammar::find(std::string_view name) const {
    for (std::size_t i = 0; i < rules.size(); ++i) {
        if (rules[i].name == name) return static_cast<int32_t>(i);
    }
    return -1;
}

std::vector<CodepointRange> normalize(std::vector<CodepointRange> ranges) {
    // Surrogates are not scalar values: no UTF-8 text holds them.
    std::vector<CodepointRange> split;
    for (const CodepointRange& r : ranges) {
        if (r.lo > r.hi) continue;
        if (r.hi < 0xD800 || r.lo > 0xDFFF) {
            split.push_back(r);
            continue;
        }
        if (r.lo < 0xD800) split.push_back({r.lo, 0xD7FF});
        if (r.hi > 0xDFFF) split.push_back({0xE000, r.hi});
    }
    std::sort(split.begin(), split.end(),
              [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
    std::vector<CodepointRange> out;
    for (const CodepointRange& r : split) {
        if (!out.empty() && r.lo <= out.back().hi + 1) {
            out.back().hi = std::max(out.back().hi, r.hi);
        } else {
            out.push_back(r);
        }
    }
    return out;
}

std::vector<CodepointRange> complement(const std::vector<CodepointRange>& ranges) {
    std::vector<CodepointRange> out;
    char32_t next = 0;
    for (const CodepointRange& r : ranges) {
        if (r.lo > next) out.push_back({next, r.lo - 1});
        next = r.hi + 1;
    }
    if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
    return normalize(std::move(out));
}

namespace {

void append_escaped_codepoint(std::string& out, char32_t cp, std::string_view specials) {
    if (append_control_escape(out, cp, HexCase::kUpper)) return;
    if (cp < 0x80 && specials.find(static_cast<char>(cp)) != std::string_view::npos) {
        out += '\\';
        out += static_cast<char>(cp);
    } else if (cp >= 0x80 && cp <= 0x9F) {  // C1 controls: invisible in most terminals
        out += "\\u";
        append_hex(out, static_cast<uint32_t>(cp), 4, HexCase::kUpper);
    } else {
        append_utf8(out, cp);
    }
}

void print_literal(std::string& out, std::string_view text) {
    out += '"';
    char32_t cp = 0;
    for (std::size_t i = 0; i < text.size();) {
        const std::size_t n = decode_utf8(text, i, cp);
        if (n == 0) {  // cannot happen for parsed grammars, whose literals are valid UTF-8
            out += "\\x";
            append_hex(out, static_cast<unsigned char>(text[i]), 2, HexCase::kUpper);
            ++i;
            continue;
        }
        append_escaped_codepoint(out, cp, "\"\\");
        i += n;
    }
    out += '"';
}

void print_class(std::string& out, const std::vector<CodepointRange>& ranges) {
    // The shorter of the class and its negation.
    const auto negated = complement(ranges);
    const bool negate = !ranges.empty() && negated.size() < ranges.size();
    const auto& shown = negate ? negated : ranges;
    if (shown.empty()) {  // nothing, or (negated nothing) everything
        out += negate ? "[^]" : "[^\\x00-\\U0010FFFF]";
        return;
    }
    out += negate ? "[^" : "[";
    for (const CodepointRange& r : shown) {
        append_escaped_codepoint(out, r.lo, "]\\-^[");
        if (r.hi != r.lo) {
            if (r.hi > r.lo + 1) out += '-';
            append_escaped_codepoint(out, r.hi, "]\\-^[");
        }
    }
    out += ']';
}

void print_expr(std::string& out, const Expr& e, const Grammar* g, bool in_sequence);

void print_atom(std::string& out, const Expr& e, const Grammar* g) {
    const bool simple = e.kind == Expr::Kind::Literal || e.kind == Expr::Kind::CharClass ||
                        e.kind == Expr::Kind::RuleRef ||
                        (e.kind == Expr::Kind::Sequence && e.children.size() == 1 &&
                         e.children[0].kind != Expr::Kind::Repeat);
    if (simple) return print_expr(out, e, g, true);
    out += '(';
    print_expr(out, e, g, false);
    out += ')';
}

void print_expr(std::string& out, const Expr& e, const Grammar* g, bool in_sequence) {
    switch (e.kind) {
        case Expr::Kind::Literal:
            return print_literal(out, e.text);
        case Expr::Kind::CharClass:
            return print_class(out, e.ranges);
        case Expr::Kind::RuleRef:
            out += g != nullptr && e.rule >= 0 && static_cast<std::size_t>(e.rule) < g->rules.size()
                       ? g->rules[static_cast<std::size_t>(e.rule)].name
                       : concat("rule", e.rule);
            return;
        case Expr::Kind::Sequence:
            if (e.children.empty()) {
                out += "\"\"";
                return;
            }
            for (std::size_t i = 0; i < e.children.size(); ++i) {
                if (i > 0) out += ' ';
                const Expr& c = e.children[i];
                if (c.kind == Expr::Kind::Alternation) {
                    out += '(';
                    print_expr(out, c, g, false);
                    out += ')';
                } else {
                    print_expr(out, c, g, true);
                }
            }
            return;
        case Expr::Kind::Alternation:
            if (in_sequence) out += '(';
            for (std::size_t i = 0; i < e.children.size(); ++i) {
                if (i > 0) out += " | ";
                print_expr(out, e.children[i], g, true);
            }
            if (in_sequence) out += ')';
            return;
        case Expr::Kind::Repeat: {
            print_atom(out, e.children[0], g);
            if (e.min == 0 && e.max == Expr::kUnbounded) {
                out += '*';
            } else if (e.min == 1 && e.max == Expr::kUnbounded) {
                out += '+';
            } else if (e.min == 0 && e.max == 1) {
                out += '?';
            } else if (e.max == Expr::kUnbounded) {
                out += '{' + std::to_string(e.min) + ",}";
            } else if (e.min == e.max) {
                out += '{' + std::to_string(e.min) + '}';
            } else {
                out += '{' + std::to_string(e.min) + ',' + std::to_string(e.max) + '}';
            }
            return;
        }
    }
}

}  // namespace

std::string Grammar::to_gbnf() const {
    std::string out;
    for (const Rule& r : rules) {
        out += r.name;
        out += " ::= ";
        print_expr(out, r.body, this, false);
        out += '\n';
    }
    return out;
}

std::string expr_to_gbnf(const Expr& e, const Grammar* grammar) {
    std::string out;
    print_expr(out, e, grammar, false);
    return out;
}

}  // namespace minfer::grammar
