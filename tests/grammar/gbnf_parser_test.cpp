// The GBNF parser: every construct, every error message (line, column, what was expected), the
// limits, and printing back.

#include <gtest/gtest.h>

#include "core/error.h"
#include "grammar/grammar.h"

namespace minfer::grammar {
namespace {

std::string error_of(std::string_view text) {
    try {
        parse_gbnf(text);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

// Parsing the printed form gives the same printed form.
void expect_round_trip(std::string_view text) {
    const Grammar g = parse_gbnf(text);
    const std::string printed = g.to_gbnf();
    EXPECT_EQ(parse_gbnf(printed).to_gbnf(), printed) << text;
}

TEST(GbnfParser, RulesAndRoot) {
    const Grammar g = parse_gbnf("root ::= greeting \" world\"\ngreeting ::= \"hello\" | \"hi\"\n");
    ASSERT_EQ(g.rules.size(), 2u);
    EXPECT_EQ(g.rules[static_cast<std::size_t>(g.root)].name, "root");
    const Expr& body = g.rules[0].body;
    ASSERT_EQ(body.kind, Expr::Kind::Sequence);
    ASSERT_EQ(body.children.size(), 2u);
    EXPECT_EQ(body.children[0].kind, Expr::Kind::RuleRef);
    EXPECT_EQ(body.children[0].rule, 1);
    EXPECT_EQ(body.children[1].text, " world");
    EXPECT_EQ(g.rules[1].body.kind, Expr::Kind::Alternation);
}

TEST(GbnfParser, RootNeedNotComeFirst) {
    const Grammar g = parse_gbnf("a ::= \"x\"\nroot ::= a a\n");
    EXPECT_EQ(g.root, 1);
}

TEST(GbnfParser, Repetitions) {
    const Grammar g =
        parse_gbnf("root ::= \"a\"* \"b\"+ \"c\"? \"d\"{3} \"e\"{2,} \"f\"{1,4} \"g\"{,5}");
    const auto& c = g.rules[0].body.children;
    ASSERT_EQ(c.size(), 7u);
    const std::pair<int, int> expected[] = {{0, -1}, {1, -1}, {0, 1}, {3, 3},
                                            {2, -1}, {1, 4},  {0, 5}};
    for (std::size_t i = 0; i < 7; ++i) {
        EXPECT_EQ(c[i].kind, Expr::Kind::Repeat) << i;
        EXPECT_EQ(c[i].min, expected[i].first) << i;
        EXPECT_EQ(c[i].max, expected[i].second) << i;
    }
}

TEST(GbnfParser, GroupsAndNestedRepetition) {
    const Grammar g = parse_gbnf("root ::= (\"a\" | \"b\" (\"c\")*)+ .");
    const Expr& body = g.rules[0].body;
    ASSERT_EQ(body.children.size(), 2u);
    EXPECT_EQ(body.children[0].kind, Expr::Kind::Repeat);
    EXPECT_EQ(body.children[1].kind, Expr::Kind::CharClass);
    // '.' is any code point but no surrogate.
    EXPECT_EQ(body.children[1].ranges,
              (std::vector<CodepointRange>{{0, 0xD7FF}, {0xE000, 0x10FFFF}}));
}

TEST(GbnfParser, LiteralEscapes) {
    const Grammar g = parse_gbnf(R"(root ::= "\x41\u00e9\U0001F600\t\n\r\\\"\[\]\/ é")");
    EXPECT_EQ(g.rules[0].body.text, "A\xC3\xA9\xF0\x9F\x98\x80\t\n\r\\\"[]/ \xC3\xA9");
}

TEST(GbnfParser, CharacterClasses) {
    const Grammar g = parse_gbnf(R"(root ::= [a-z0-9_] [^"\\] [\x00-\x1F] [-a] [a-])");
    const auto& c = g.rules[0].body.children;
    EXPECT_EQ(c[0].ranges, (std::vector<CodepointRange>{{'0', '9'}, {'_', '_'}, {'a', 'z'}}));
    EXPECT_EQ(c[1].ranges,
              (std::vector<CodepointRange>{
                  {0, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, 0xD7FF}, {0xE000, 0x10FFFF}}));
    EXPECT_EQ(c[2].ranges, (std::vector<CodepointRange>{{0, 0x1F}}));
    EXPECT_EQ(c[3].ranges, (std::vector<CodepointRange>{{'-', '-'}, {'a', 'a'}}));
    EXPECT_EQ(c[4].ranges, (std::vector<CodepointRange>{{'-', '-'}, {'a', 'a'}}));
}

TEST(GbnfParser, CommentsAndLineBreaks) {
    const Grammar g = parse_gbnf(
        "# a comment\n"
        "root ::= # after the operator\n"
        "  item (\n"
        "    \",\" item  # inside a group\n"
        "  )*\n"
        "\n"
        "item ::= \"x\" |\n"
        "         \"y\"\n");
    EXPECT_EQ(g.rules.size(), 2u);
    EXPECT_EQ(g.rules[1].body.children.size(), 2u);
}

TEST(GbnfParser, Errors) {
    EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""),
              "grammar: line 2, column 1: the rule 'root' is defined twice");
    EXPECT_EQ(error_of("item ::= \"a\""),
              "grammar: line 1, column 13: the grammar has no 'root' rule (the rule generation "
              "starts from)");
    EXPECT_EQ(error_of("root ::= item"),
              "grammar: line 1, column 10: the rule 'item' is used but never defined");
    EXPECT_EQ(error_of("root = \"a\""),
              "grammar: line 1, column 6: expected '::=' after the rule name 'root', found '='");
    EXPECT_EQ(error_of("root ::= \"a"), "grammar: line 1, column 10: this string is never closed");
    EXPECT_EQ(error_of("root ::= \"a\nb\""),
              "grammar: line 1, column 12: the string is never closed on its line");
    EXPECT_EQ(error_of("root ::= [a-"),
              "grammar: line 1, column 10: this character class is never closed");
    EXPECT_EQ(error_of("root ::= [z-a]"),
              "grammar: line 1, column 13: the range ends below where it starts");
    EXPECT_EQ(error_of("root ::= (\"a\""), "grammar: line 1, column 10: this '(' is never closed");
    EXPECT_EQ(error_of("root ::= (\"a\" ]"),
              "grammar: line 1, column 15: expected ')' or '|', found ']'");
    EXPECT_EQ(error_of("root ::= \"a\" ]"),
              "grammar: line 1, column 14: expected the end of the line after the rule 'root', "
              "found ']'");
    EXPECT_EQ(error_of("root ::= \"a\"{2"),
              "grammar: line 1, column 15: expected '}' to end the repetition, found the end of "
              "the grammar");
    EXPECT_EQ(error_of("root ::= \"a\"{5,2}"),
              "grammar: line 1, column 18: the repetition {5,2} has its maximum below its minimum");
    EXPECT_EQ(error_of("root ::= \"a\"{100000}"),
              "grammar: line 1, column 19: a repetition count above 10000 is not allowed");
    EXPECT_EQ(error_of("root ::= \"\\q\""), "grammar: line 1, column 11: unknown escape '\\q'");
    EXPECT_EQ(error_of("root ::= \"\\x4\""),
              "grammar: line 1, column 11: expected 2 hexadecimal digits after '\\x'");
    EXPECT_EQ(error_of("root ::= \"\\uD800\""),
              "grammar: line 1, column 11: the escape is not a Unicode scalar value");
    EXPECT_EQ(error_of("::= \"a\""), "grammar: line 1, column 1: expected a rule name, found ':'");
    EXPECT_EQ(error_of("root ::= \"\xff\""),
              "grammar: line 1, column 11: the grammar is not valid UTF-8");
    EXPECT_EQ(error_of("é ::= \"a\""),
              "grammar: line 1, column 1: expected a rule name, found 'é'");
}

TEST(GbnfParser, NestingIsBounded) {
    std::string deep = "root ::= ";
    for (int i = 0; i < 300; ++i) deep += '(';
    deep += "\"a\"";
    for (int i = 0; i < 300; ++i) deep += ')';
    EXPECT_NE(error_of(deep).find("groups nest deeper than 256 levels"), std::string::npos);
}

TEST(GbnfParser, PrintsBackEquivalently) {
    expect_round_trip("root ::= greeting \" world\"\ngreeting ::= \"hello\" | \"hi\"\n");
    expect_round_trip(R"(root ::= [^"\\\x7F\x00-\x1F] ("a" | "b")* "c"{2,5} [a-z]+ .? "\u00e9\n")");
    expect_round_trip("root ::= (\"a\" \"b\")+ (\"c\" | (\"d\")?)\n");
    // The printed grammar of a sequence inside a repetition keeps its parentheses.
    const Grammar g = parse_gbnf("root ::= (\"a\" \"b\")*");
    EXPECT_EQ(g.to_gbnf(), "root ::= (\"a\" \"b\")*\n");
}

}  // namespace
}  // namespace minfer::grammar

namespace minfer::grammar {
namespace {

TEST(GbnfParser, StackedPostfixesCountAsNesting) {
    EXPECT_NE(error_of("root ::= \"a\"" + std::string(30000, '?'))
                  .find("repetitions and groups nest deeper than 256 levels"),
              std::string::npos);
    EXPECT_EQ(error_of("root ::= \"a\"*?+"), "(no error)");
}

}  // namespace
}  // namespace minfer::grammar
