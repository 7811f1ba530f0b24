#pragma once
// A grammar lowered to bytes, the form the matcher runs: every rule is a list of alternatives,
// every alternative a sequence of elements that each match one byte from a set, call a rule, or
// match one special token; character classes become the UTF-8 byte sequences of their code
// points, repetitions become helper rules (x* is `r ::= x r | ""`, x{2,4} is `x x (x (x)?)?`),
// literals equal to a control token's text (`<tool_call>`, `[TOOL_CALLS]`) may also be that token.
//
// Layout: `elements` holds every alternative's elements followed by an End element, so a position
// in the grammar is one index into it. A small rule that does not recurse is inlined where a loop
// calls it (the `x` of x*, or rules that call each other in a cycle), so that a loop such as a
// JSON string's characters runs inside one rule: the token masks cached per position
// (compiled_grammar.h) then depend on less of the surrounding stack.
//
// lower() refuses what the matcher cannot run: left recursion (`a ::= a "x" | "y"`), a start rule
// that can never finish, and grammars that expand past kMaxElements.

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace minfer::grammar {

struct ByteSet {
    std::array<uint64_t, 4> words{};
    void set(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
    void set_range(uint8_t lo, uint8_t hi) {
        for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
    }
    bool test(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
    bool operator==(const ByteSet&) const = default;
};

enum class ElementKind : uint8_t {
    Bytes,  // one byte of byte_sets[value]
    Rule,   // the rule `value`
    Token,  // the (special) token id `value`
    End,    // the end of an alternative of rule `value`
};

struct Element {
    ElementKind kind = ElementKind::End;
    int32_t value = 0;
};

struct ByteGrammar {
    std::vector<Element> elements;
    std::vector<std::vector<int32_t>>
        alternatives;                     // rule -> the positions its alternatives start at
    std::vector<std::string> rule_names;  // for messages and dumps
    std::vector<ByteSet> byte_sets;
    int32_t root = 0;

    std::size_t n_rules() const { return alternatives.size(); }
    // A readable listing, one alternative a line (tests, --print-grammar debugging).
    std::string dump() const;
};

inline constexpr std::size_t kMaxElements = 1 << 20;

// special_tokens: control tokens by their text; a literal equal to one also matches the token.
ByteGrammar lower(const Grammar& grammar,
                  const std::unordered_map<std::string, int32_t>& special_tokens = {});

}  // namespace minfer::grammar
