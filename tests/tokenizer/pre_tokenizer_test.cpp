// The hand-written GPT-2 and Llama-3/Qwen2 splitters against PCRE2 running the patterns
// themselves, and minfer's Unicode tables against PCRE2's.

#include <gtest/gtest.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <random>

#include "common/fixtures.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace minfer::test {
namespace {

// Pieces chosen to hit every branch of the patterns: contractions in both cases, letters,
// digits, runs of spaces, CR/LF, wide spaces, marks, symbols, surrogates and invalid bytes.
const std::vector<std::string> kAlphabet = {
    "a",
    "Z",
    "s",
    "t",
    "re",
    "VE",
    "ll",
    "D",
    "m",
    "'",
    "'",
    "1",
    "22",
    "333",
    " ",
    " ",
    "  ",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\v",
    "\f",
    ".",
    ",",
    "!",
    "?",
    "$",
    "+",
    "<",
    "`",
    "~",
    "|",
    "/",
    "\xC3\xA9",          // é
    "\xD0\x96",          // Ж
    "\xE4\xB8\xAD",      // 中
    "\xD9\xA3",          // ARABIC-INDIC DIGIT THREE
    "\xC2\xA0",          // NO-BREAK SPACE
    "\xE3\x80\x80",      // IDEOGRAPHIC SPACE
    "\xC2\x85",          // NEXT LINE
    "\xE2\x80\xA8",      // LINE SEPARATOR
    "\xCC\x81",          // COMBINING ACUTE ACCENT
    "\xF0\x9F\xA6\x99",  // 🦙
    "\xE2\x80\x8D",      // ZERO WIDTH JOINER
    "\xED\xA0\x80",      // a surrogate, which llama.cpp decodes
    "\xFF",              // invalid
    "\xC3",              // truncated
    "\xE3\x80\x82",      // 。
    "\xEF\xBC\x81",      // ！
};

std::string random_text(std::mt19937& rng, int pieces) {
    std::uniform_int_distribution<std::size_t> pick(0, kAlphabet.size() - 1);
    std::string s;
    for (int i = 0; i < pieces; ++i) s += kAlphabet[pick(rng)];
    return s;
}

class PreTokenizerFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(PreTokenizerFamily, FastSplitEqualsRegexSplit) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-" + GetParam() + ".gguf");
    const Tokenizer tok = load_tokenizer(path);
    std::vector<std::string> texts;
    for (const VocabCase& c : read_vocab_cases(path)) texts.push_back(c.text);
    std::mt19937 rng(1234);
    for (int i = 0; i < 3000; ++i) texts.push_back(random_text(rng, 1 + i % 40));
    for (const std::string& text : texts) {
        const std::vector<std::string> fast = tok.pre_tokenize(text, false);
        const std::vector<std::string> regex = tok.pre_tokenize(text, true);
        ASSERT_EQ(fast, regex) << GetParam() << " text: \"" << text << "\"";
        std::string joined;
        for (const std::string& w : fast) {
            EXPECT_FALSE(w.empty());
            joined += w;
        }
        EXPECT_EQ(joined, unicode::canonicalize(text));
    }
}

INSTANTIATE_TEST_SUITE_P(Families, PreTokenizerFamily,
                         ::testing::Values("gpt-2", "gpt2-llama3-pre", "gpt2-qwen2-pre", "falcon",
                                           "starcoder", "deepseek-coder", "deepseek-llm"),
                         [](const auto& param_info) {
                             std::string name = param_info.param;
                             for (char& ch : name) {
                                 if (ch == '-') ch = '_';
                             }
                             return name;
                         });

// Words of the GPT-2 pattern on a text written to show each rule (reference split by hand).
TEST(PreTokenizer, Gpt2SplitsLikeThePattern) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-gpt-2.gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::vector<std::string> expected = {"Hello", ",",  " world", "'s", " 123",
                                               "   ",   " x", "!!",     "\n"};
    EXPECT_EQ(tok.pre_tokenize("Hello, world's 123    x!!\n", false), expected);
}

TEST(PreTokenizer, Llama3GroupsDigitsByThree) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-gpt2-llama3-pre.gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::vector<std::string> got = tok.pre_tokenize("1234567  I'M\n\n", false);
    EXPECT_EQ(got, (std::vector<std::string>{"123", "456", "7", " ", " I", "'M", "\n\n"}));
}

// The generated category tables agree with PCRE2's own, code point by code point.
TEST(UnicodeTables, AgreeWithPcre2) {
    struct Class {
        const char* pattern;
        uint8_t flag;
    };
    const Class classes[] = {{"\\p{L}", unicode::kLetter},      {"\\p{N}", unicode::kNumber},
                             {"\\p{P}", unicode::kPunctuation}, {"\\p{S}", unicode::kSymbol},
                             {"\\p{M}", unicode::kMark},        {"\\p{C}", unicode::kControl},
                             {"\\p{Z}", unicode::kSeparator}};
    pcre2_match_data* match = pcre2_match_data_create(4, nullptr);
    for (const Class& c : classes) {
        int error = 0;
        PCRE2_SIZE offset = 0;
        pcre2_code* code =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(c.pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_ANCHORED, &error, &offset, nullptr);
        ASSERT_NE(code, nullptr);
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        int mismatches = 0;
        for (uint32_t cp = 0; cp <= unicode::kMaxCodepoint; ++cp) {
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;  // not encodable in UTF-8
            std::string s;
            unicode::append_utf8(s, cp);
            const bool pcre = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                                          0, match, nullptr) >= 0;
            const bool ours = (unicode::flags(cp) & c.flag) != 0;
            if (pcre != ours && mismatches++ < 5) {
                ADD_FAILURE() << c.pattern << " disagrees at U+" << std::hex << cp;
            }
        }
        EXPECT_EQ(mismatches, 0) << c.pattern;
        pcre2_code_free(code);
    }
    pcre2_match_data_free(match);
}

TEST(UnicodeTables, CaseAndAccents) {
    EXPECT_EQ(unicode::to_lower('A'), static_cast<uint32_t>('a'));
    EXPECT_EQ(unicode::to_lower(0x416), 0x436u);    // Ж -> ж
    EXPECT_EQ(unicode::to_lower(0x130), 0x69u);     // İ -> i (first code point of "i̇")
    EXPECT_EQ(unicode::nfd_base(0xE9), 0x65u);      // é -> e
    EXPECT_EQ(unicode::nfd_base(0x1E69), 0x73u);    // ṩ -> s
    EXPECT_EQ(unicode::nfd_base(0x4E2D), 0x4E2Du);  // 中 unchanged
    EXPECT_TRUE(unicode::is_whitespace(0x85));
    EXPECT_TRUE(unicode::is_whitespace(0x3000));
    EXPECT_FALSE(unicode::is_whitespace(0x200B));
}

TEST(Utf8, LenientDecodingAsLlamaCpp) {
    EXPECT_EQ(unicode::canonicalize("a\xFF"
                                    "b"),
              "a\xEF\xBF\xBD"
              "b");
    EXPECT_EQ(unicode::canonicalize("\xC0\x80"), std::string(1, '\0'));  // overlong NUL
    EXPECT_EQ(unicode::canonicalize("\xED\xA0\x80"), "\xED\xA0\x80");    // surrogate kept
    EXPECT_EQ(unicode::canonicalize("\xF4\x90\x80\x80"),                 // past U+10FFFF
              "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_TRUE(unicode::is_canonical("h\xC3\xA9llo \xF0\x9F\xA6\x99"));
    EXPECT_FALSE(unicode::is_canonical("\xC3"));
    EXPECT_FALSE(unicode::is_valid_utf8("\xED\xA0\x80"));
    EXPECT_TRUE(unicode::is_valid_utf8("\xE4\xB8\xAD"));
}

}  // namespace
}  // namespace minfer::test
