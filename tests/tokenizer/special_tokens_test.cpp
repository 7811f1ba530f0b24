// Special tokens: parse_special, BOS/EOS, end-of-generation ids, and how pieces are shown.

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace minfer::test {
namespace {

constexpr int32_t kQwenEndOfText = 8192, kQwenImStart = 8193, kQwenImEnd = 8194;

TEST(SpecialTokens, ControlTextBecomesTokenOnlyWhenParsed) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-qwen2-f16.gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::vector<int32_t> parsed = tok.tokenize("<|im_start|>user", false, true);
    EXPECT_EQ(parsed, (std::vector<int32_t>{kQwenImStart, 7220}));
    const std::vector<int32_t> plain = tok.tokenize("<|im_start|>user", false, false);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), kQwenImStart), 0);
    EXPECT_EQ(tok.detokenize(plain, false), "<|im_start|>user");
    EXPECT_EQ(tok.detokenize(parsed, true), "<|im_start|>user");
    EXPECT_EQ(tok.detokenize(parsed, false), "user");
}

TEST(SpecialTokens, QwenEndOfGeneration) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-qwen2-f16.gguf");
    const Tokenizer tok = load_tokenizer(path);
    EXPECT_TRUE(tok.is_eog(kQwenImEnd));
    EXPECT_TRUE(tok.is_eog(kQwenEndOfText));
    EXPECT_FALSE(tok.is_eog(kQwenImStart));
    EXPECT_FALSE(tok.is_eog(0));
    EXPECT_FALSE(tok.is_eog(-5));
    EXPECT_EQ(tok.eos(), kQwenImEnd);
    EXPECT_EQ(tok.bos(), kQwenEndOfText);
    EXPECT_EQ(tok.eot(), kQwenImEnd);  // first of llama.cpp's list of end-of-turn texts
    EXPECT_FALSE(tok.add_bos());
    EXPECT_EQ(tok.tokenize("Hi", true, true), tok.tokenize("Hi", false, true));
    EXPECT_EQ(tok.token_to_piece(kQwenImEnd, false), "");
    EXPECT_EQ(tok.token_to_piece(kQwenImEnd, true), "<|im_end|>");
    EXPECT_TRUE(tok.is_control(kQwenImEnd));
}

TEST(SpecialTokens, SentencePieceBosAndEos) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-llama-spm.gguf");
    const Tokenizer tok = load_tokenizer(path);
    EXPECT_EQ(tok.n_vocab(), 32000);
    EXPECT_EQ(tok.bos(), 1);
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_EQ(tok.unk(), 0);
    EXPECT_FALSE(tok.pad().has_value());
    EXPECT_TRUE(tok.add_bos());
    EXPECT_FALSE(tok.add_eos());
    EXPECT_TRUE(tok.is_eog(2));
    EXPECT_EQ(tok.token_text(1), "<s>");
    const std::vector<int32_t> ids = tok.tokenize("Hello world", true, false);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), 1);
    EXPECT_EQ(tok.tokenize("", true, false), std::vector<int32_t>{1});
    EXPECT_TRUE(tok.tokenize("", false, false).empty());
    // "<s>" in the text is the BOS token only when special text is parsed; then the text after
    // it gets SentencePiece's space prefix again
    std::vector<int32_t> expected{1};
    const std::vector<int32_t> rest = tok.tokenize("Hi", false, false);
    expected.insert(expected.end(), rest.begin(), rest.end());
    EXPECT_EQ(tok.tokenize("<s>Hi", false, true), expected);
    EXPECT_NE(tok.tokenize("<s>Hi", false, false).front(), 1);
}

// llama.cpp's detokenize strips SentencePiece's prefix space from the first piece only: with BOS
// first (hidden), the space of the next piece stays.
TEST(SpecialTokens, SentencePieceLeadingSpaceRule) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-llama-spm.gguf");
    const Tokenizer tok = load_tokenizer(path);
    EXPECT_EQ(tok.detokenize(tok.tokenize("Hello world", false, false), false), "Hello world");
    EXPECT_EQ(tok.detokenize(tok.tokenize("Hello world", true, false), false), " Hello world");
    EXPECT_EQ(tok.detokenize(tok.tokenize("Hello world", true, false), true), "<s> Hello world");
    EXPECT_EQ(tok.token_to_piece(tok.tokenize("Hello", false, false).front(), false), " Hello");
}

TEST(SpecialTokens, ByteFallbackDecodesToBytes) {
    MINFER_REQUIRE_FIXTURE(path, "models/stories260K.gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::string text =
        "Lily saw \xF0\x9F\xA6\x99 and \xE4\xB8\xAD!";  // 🦙 中: byte tokens
    const std::vector<int32_t> ids = tok.tokenize(text, false, false);
    int bytes = 0;
    for (int32_t id : ids) bytes += tok.token_text(id).substr(0, 3) == "<0x";
    EXPECT_GE(bytes, 7);
    EXPECT_EQ(tok.token_to_piece(3 + 0xF0, false), "\xF0");  // <0xF0> is id 3 + 0xF0
    EXPECT_EQ(tok.detokenize(ids, false), text);
}

TEST(SpecialTokens, BpeCleansTokenizationSpaces) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-gpt-2.gguf");
    const Tokenizer tok = load_tokenizer(path);
    EXPECT_EQ(tok.detokenize(tok.tokenize("Hello , world . It 's", false, false), false),
              "Hello, world. It's");
    EXPECT_EQ(tok.detokenize(tok.tokenize("Hello, world!", false, false), false), "Hello, world!");
    EXPECT_EQ(tok.token_to_piece(tok.tokenize(" world", false, false).front(), false), " world");
}

TEST(SpecialTokens, WordPieceFramesWithClsAndSep) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-bert-bge.gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::vector<int32_t> ids = tok.tokenize("Hello world", true, false);
    EXPECT_EQ(ids, (std::vector<int32_t>{101, 7592, 2088, 102}));
    EXPECT_TRUE(tok.add_bos());
    EXPECT_EQ(tok.detokenize(ids, true), "[CLS] hello world[SEP]");
    EXPECT_EQ(tok.tokenize("[CLS]", false, true), std::vector<int32_t>{101});
}

// Special tokens are matched longest text first over the whole text, not leftmost first.
TEST(SpecialTokens, LongestTokenFirstAsLlamaCpp) {
    std::vector<SyntheticToken> tokens = spm_base_tokens();
    tokens.push_back({"ab", 3});   // control
    tokens.push_back({"bcd", 3});  // control, longer: cut first
    tokens.push_back(
        {"\xE2\x96\x81"
         "a",
         1, -1.0f});
    tokens.push_back({"\xE2\x96\x81", 1, -2.0f});
    tokens.push_back({"<user>", 4});  // user-defined: cut even without parse_special
    const int32_t ab = 259, bcd = 260, space_a = 261, space = 262, user = 263;
    const Tokenizer tok = Tokenizer::from_gguf(make_metadata("llama", tokens));
    EXPECT_EQ(tok.tokenize("abcd", false, true), (std::vector<int32_t>{space_a, bcd}));
    EXPECT_EQ(tok.tokenize("xabx", false, true),
              (std::vector<int32_t>{space, 3 + 'x', ab, space, 3 + 'x'}));
    EXPECT_EQ(tok.tokenize("a<user>a", false, false),
              (std::vector<int32_t>{space_a, user, space_a}));
}

}  // namespace
}  // namespace minfer::test
