#pragma once
// A context-free grammar over Unicode text, in the form GBNF writes it (llama.cpp's grammar
// format): named rules whose bodies are expressions of literals, character classes, references to
// rules, groups, alternatives and repetitions. This is the vocabulary-independent form; the
// matcher works on its lowering to bytes (grammar/byte_grammar.h).
//
//   root   ::= "yes" | "no" | answer
//   answer ::= [a-z]+ ("," [a-z]+){0,3}   # comments run to the end of the line
//
// parse_gbnf reports every error as a UsageError "grammar: line L, column C: what was expected"
// (a grammar comes from a flag or a request), and bounds what a hostile text can ask for: nesting
// depth, repetition counts, and the size after repetitions are expanded.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace minfer::grammar {

// A closed range of code points, lo <= hi <= U+10FFFF.
struct CodepointRange {
    char32_t lo = 0;
    char32_t hi = 0;
    bool operator==(const CodepointRange&) const = default;
};

struct Expr {
    enum class Kind : uint8_t {
        Literal,      // text: exactly these UTF-8 bytes ("" matches the empty string)
        CharClass,    // one code point of `ranges` (negation already applied)
        RuleRef,      // the rule `rule`
        Sequence,     // children one after another
        Alternation,  // one of children
        Repeat,       // children[0] between min and max times (max = kUnbounded: no limit)
    };
    static constexpr int32_t kUnbounded = -1;

    Kind kind = Kind::Sequence;
    std::string text;                    // Literal
    std::vector<CodepointRange> ranges;  // CharClass: sorted, disjoint, not adjacent
    int32_t rule = -1;                   // RuleRef: index into Grammar::rules
    std::vector<Expr> children;          // Sequence, Alternation, Repeat (one child)
    int32_t min = 0;                     // Repeat
    int32_t max = kUnbounded;            // Repeat

    static Expr literal(std::string text);
    static Expr char_class(std::vector<CodepointRange> ranges);
    static Expr rule_ref(int32_t rule);
    static Expr sequence(std::vector<Expr> children);
    static Expr alternation(std::vector<Expr> children);
    static Expr repeat(Expr child, int32_t min, int32_t max);
};

struct Rule {
    std::string name;
    Expr body;
};

struct Grammar {
    std::vector<Rule> rules;
    int32_t root = -1;  // the rule generation starts from ("root" in GBNF)

    // The rule named `name`, or -1.
    int32_t find(std::string_view name) const;
    // GBNF text that parses back into an equivalent grammar (for --print-grammar and tests).
    std::string to_gbnf() const;
};

// The GBNF text of one expression; rule references are named from `grammar` (which may be null
// when there are none).
std::string expr_to_gbnf(const Expr& e, const Grammar* grammar = nullptr);

// Limits on what a grammar text may ask for. A repetition {m,n} with n up to kMaxRepeat is
// expanded into n copies, so the expanded size is bounded separately.
inline constexpr int32_t kMaxRepeat = 10000;
inline constexpr int kMaxNesting = 256;
inline constexpr std::size_t kMaxGrammarBytes = 4 << 20;

// Parses GBNF text. The start rule is `root`. Throws UsageError naming line and column.
Grammar parse_gbnf(std::string_view text);

// The code points a negated class [^...] leaves: every scalar value (U+0000..U+10FFFF, surrogates
// excluded) outside `ranges`. `ranges` must be normalized.
std::vector<CodepointRange> complement(const std::vector<CodepointRange>& ranges);
// Sorts, merges overlapping and adjacent ranges, and removes surrogates.
std::vector<CodepointRange> normalize(std::vector<CodepointRange> ranges);

}  // namespace minfer::grammar
