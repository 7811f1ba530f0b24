// The matcher's token masks against an independent backtracking recognizer, token by token along
// random walks through real grammars (the kinds llama.cpp ships as examples), over a small
// vocabulary with multi-byte, partial-UTF-8 and special tokens.

#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar.h"
#include "reference_recognizer.h"
#include "test_grammars.h"

namespace minfer::grammar {
namespace {

constexpr int32_t kEog = 0;
constexpr int32_t kToolCall = 1;  // a control token, "<tool_call>"

std::shared_ptr<const GrammarVocabulary> test_vocabulary() {
    std::vector<std::string> pieces = {"", ""};  // EOG, <tool_call>
    for (int c = 0x20; c < 0x7F; ++c) pieces.emplace_back(1, static_cast<char>(c));
    for (const char* s :
         {"\n",          "\t",       "{\"",      "\":",          "\", \"", "\",",      "\"}",
          "}]",          "},",       "[{",       ", ",           ": ",     "  ",       " \n",
          "\n  ",        "true",     "false",    "null",         "nul",    "12",       "3.",
          ".5",          "e+",       "E-",       "-0",           "007",    "ab",       "abc",
          "the",         " the",     "hello",    " world",       "a\"",    "x\\",      "\\n",
          "\\u00",       "é",        "\xC3",     "\xA9",         "日本",   "\xE6\x97", "\xA5",
          "😀",           "\xF0\x9F", "\x98\x80", "ぁ",           "ゔ",     "e4",       "Nf3",
          "O-O",         "Qxe7",     "+#",       "1. ",          "(1",     "+2)",      "*3",
          "<tool_call>", "<tool",    "_call>",   "</tool_call>", "[TOOL",  "\x80",     "\xFF",
          "ab\xC3"}) {
        pieces.emplace_back(s);
    }
    std::unordered_map<std::string, int32_t> special{{"<tool_call>", kToolCall}};
    return std::make_shared<GrammarVocabulary>(std::move(pieces), std::vector<int32_t>{kEog},
                                               std::move(special));
}

// Whether the oracle allows token `id` after `text`.
bool oracle_allows(const Grammar& g, const GrammarVocabulary& v, const std::string& text,
                   int32_t id) {
    if (id == kEog) return testing::is_sentence(g, text);
    if (id == kToolCall) return false;  // grammars using it are checked separately
    const std::string_view bytes = v.bytes_of(id);
    return testing::viable_prefix(g, text + std::string(bytes));
}

void random_walks(std::string_view gbnf, int walks, int steps, bool eager) {
    const Grammar g = parse_gbnf(gbnf);
    const auto vocab = test_vocabulary();
    const auto compiled = CompiledGrammar::compile(g, vocab, eager);
    std::mt19937 rng(1234);
    TokenMask mask(vocab->n_vocab());
    for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(compiled);
        std::string text;
        for (int step = 0; step < steps; ++step) {
            m.fill_mask(mask);
            std::vector<int32_t> allowed;
            for (int32_t id = 0; id < vocab->n_vocab(); ++id) {
                const bool expected = oracle_allows(g, *vocab, text, id);
                ASSERT_EQ(mask.test(id), expected) << "token " << id << " '" << vocab->bytes_of(id)
                                                   << "' after '" << text << "' in\n"
                                                   << gbnf;
                if (expected && id != kEog) allowed.push_back(id);
            }
            EXPECT_EQ(m.is_complete(), testing::is_sentence(g, text)) << text;
            if (allowed.empty()) break;
            const int32_t pick =
                allowed[std::uniform_int_distribution<std::size_t>(0, allowed.size() - 1)(rng)];
            ASSERT_TRUE(m.accept(pick));
            text += vocab->bytes_of(pick);
        }
    }
}

class GrammarWalk : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(GrammarWalk, MasksMatchTheReferenceRecognizer) {
    random_walks(GetParam().second, 12, 24, true);
}

TEST_P(GrammarWalk, MasksComputedOnFirstUseMatchToo) {
    random_walks(GetParam().second, 4, 24, false);
}

INSTANTIATE_TEST_SUITE_P(Examples, GrammarWalk, ::testing::ValuesIn(testing::kExampleGrammars),
                         [](const auto& test) { return std::string(test.param.first); });

TEST(GrammarMatcher, RejectsWhatTheGrammarDoesNot) {
    const auto vocab = test_vocabulary();
    const auto compiled = CompiledGrammar::compile(parse_gbnf("root ::= \"ab\" [0-9]+"), vocab);
    GrammarMatcher m(compiled);
    EXPECT_FALSE(m.is_complete());
    EXPECT_FALSE(m.accept_bytes("b"));
    EXPECT_TRUE(m.accept_bytes("a"));
    EXPECT_FALSE(m.accept(kEog));  // not complete yet
    EXPECT_TRUE(m.accept_bytes("b1"));
    EXPECT_TRUE(m.is_complete());
    EXPECT_TRUE(m.can_continue());
    EXPECT_TRUE(m.accept(kEog));
    m.reset();
    EXPECT_FALSE(m.is_complete());
    EXPECT_TRUE(m.accept_bytes("ab"));
}

TEST(GrammarMatcher, ALiteralEqualToASpecialTokenMatchesTheToken) {
    const auto vocab = test_vocabulary();
    const auto compiled =
        CompiledGrammar::compile(parse_gbnf("root ::= \"<tool_call>\" [a-z]+"), vocab);
    GrammarMatcher m(compiled);
    TokenMask mask(vocab->n_vocab());
    m.fill_mask(mask);
    EXPECT_TRUE(mask.test(kToolCall));
    EXPECT_TRUE(mask.test(2 + '<' - 0x20));  // spelled out byte by byte, too
    EXPECT_FALSE(mask.test(kEog));
    ASSERT_TRUE(m.accept(kToolCall));
    m.fill_mask(mask);
    EXPECT_FALSE(mask.test(kToolCall));
    EXPECT_TRUE(mask.test(2 + 'a' - 0x20));
}

TEST(GrammarMatcher, RepetitionInsideAStringKeepsOneState) {
    const auto vocab = test_vocabulary();
    const auto compiled = CompiledGrammar::compile(parse_gbnf(testing::kJsonGrammar), vocab);
    GrammarMatcher m(compiled);
    ASSERT_TRUE(m.accept_bytes("{\"key\": \""));
    ASSERT_TRUE(m.accept_bytes("a"));
    const std::size_t states = compiled->stats().states;
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(m.accept_bytes("abc"));
    EXPECT_EQ(compiled->stats().states, states);
    EXPECT_TRUE(m.accept_bytes("\"}"));
    EXPECT_TRUE(m.is_complete());
}

TEST(GrammarMatcher, MasksOfPositionsAreSharedBetweenGrammars) {
    const auto vocab = test_vocabulary();
    const auto first = CompiledGrammar::compile(parse_gbnf(testing::kJsonGrammar), vocab);
    EXPECT_GT(first->stats().positions_computed, 0u);
    const auto second = CompiledGrammar::compile(
        parse_gbnf(std::string(testing::kJsonGrammar) + "unused ::= \"x\"\n"), vocab);
    EXPECT_EQ(second->stats().positions_computed, 0u);
    EXPECT_GT(second->stats().positions_shared, 0u);
}

std::string lowering_error(std::string_view gbnf) {
    try {
        CompiledGrammar::compile(parse_gbnf(gbnf), test_vocabulary());
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(GrammarMatcher, RefusesGrammarsItCannotRun) {
    EXPECT_EQ(lowering_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]"),
              "grammar: the rule 'expr' is left-recursive (expr -> expr): it can call itself "
              "before matching anything; write the repetition with * or + instead");
    EXPECT_EQ(lowering_error("root ::= a\na ::= b? \"x\" | \"y\"\nb ::= a"),
              "grammar: the rule 'a' is left-recursive (a -> b -> a): it can call itself before "
              "matching anything; write the repetition with * or + instead");
    EXPECT_EQ(lowering_error("root ::= \"a\" root"),
              "grammar: the rule 'root' can never finish: each of its alternatives needs a rule "
              "that never ends or matches nothing");
    EXPECT_EQ(lowering_error("root ::= [^\\x00-\\U0010FFFF]"),
              "grammar: the rule 'root' can never finish: each of its alternatives needs a rule "
              "that never ends or matches nothing");
    std::string huge = "root ::=";
    for (int i = 0; i < 120; ++i) huge += " \"a\"{10000}";
    EXPECT_NE(lowering_error(huge).find("more than 1048576 elements"), std::string::npos);
    // A repeated group is lowered once and called: no blow-up.
    EXPECT_EQ(lowering_error("root ::= ([a-z]{10000}){10000}"), "(no error)");
}

}  // namespace
}  // namespace minfer::grammar

namespace minfer::grammar {
namespace {

// A character class of many UTF-8 sequences is a helper rule; called from a loop (here two rules
// calling each other) it is inlined, so that the loop's masks do not depend on the stack below
// after every character (bench_grammar: tool_choice auto's first masks 6 ms -> 0.01 ms).
TEST(GrammarLowering, ClassesCalledFromLoopsAreInlined) {
    const ByteGrammar g = lower(parse_gbnf(
        "root ::= t0 \"!\"\nt0 ::= [^<] t0 | \"<\" t1 | \"\"\nt1 ::= [^<t] t0 | \"t\" t0 | \"\""));
    for (const std::string& name : g.rule_names)
        EXPECT_EQ(name.find("-1"), std::string::npos) << g.dump();
    // Calls in tail position stay calls: a chain x{0,20} is not unrolled.
    const ByteGrammar chain = lower(parse_gbnf("root ::= \"a\" [ \\t]{0,20} \"b\""));
    EXPECT_GE(chain.n_rules(), 20u) << chain.dump();
    EXPECT_LT(chain.elements.size(), 100u) << chain.dump();
}

}  // namespace
}  // namespace minfer::grammar

namespace minfer::grammar {
namespace {

// Two grammars share a position's structure (`w`) but not what follows it: the second one's masks
// must not be pruned for the first one's callers (a review found `hello` refused after `help`).
TEST(GrammarMatcher, MasksDoNotDependOnEarlierGrammars) {
    std::vector<std::string> pieces = {"", "hel", "hello", "help", "lo", "p", "h", "e", "l", "o"};
    const auto vocab = std::make_shared<GrammarVocabulary>(
        pieces, std::vector<int32_t>{0}, std::unordered_map<std::string, int32_t>{});
    const auto first =
        CompiledGrammar::compile(parse_gbnf("root ::= w \"p\"\nw ::= \"hel\""), vocab);
    const Grammar second_grammar = parse_gbnf("root ::= w \"lo\"\nw ::= \"hel\"");
    const auto second = CompiledGrammar::compile(second_grammar, vocab);
    EXPECT_GT(second->stats().positions_shared, 0u);
    GrammarMatcher m(second);
    TokenMask mask(vocab->n_vocab());
    m.fill_mask(mask);
    for (int32_t id = 1; id < vocab->n_vocab(); ++id) {
        EXPECT_EQ(mask.test(id),
                  testing::viable_prefix(second_grammar, pieces[static_cast<std::size_t>(id)]))
            << pieces[static_cast<std::size_t>(id)];
    }
    EXPECT_TRUE(mask.test(2));   // hello
    EXPECT_FALSE(mask.test(3));  // help
}

TEST(GrammarLowering, LongChainsOfRules) {
    // 100,000 rules, each calling the next before a byte: no recursion in the analyses.
    std::string g = "root ::= r0\n";
    for (int i = 0; i < 100000; ++i)
        g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + " \"x\"\n";
    g += "r100000 ::= \"y\"\n";
    const ByteGrammar lowered = lower(parse_gbnf(g));
    EXPECT_EQ(lowered.n_rules(), 100002u);
}

}  // namespace
}  // namespace minfer::grammar
