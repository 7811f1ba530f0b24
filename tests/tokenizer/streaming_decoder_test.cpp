// The streaming decoder never hands out part of a UTF-8 character and replaces what can never
// become one.

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "core/error.h"
#include "tokenizer/streaming_decoder.h"
#include "tokenizer_test_util.h"

namespace minfer::test {
namespace {

TEST(StreamingDecoder, HoldsBackSplitCharacters) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-llama-spm.gguf");
    const Tokenizer tok = load_tokenizer(path);
    StreamingDecoder d(tok);
    EXPECT_EQ(d.feed_bytes("h\xC3"), "h");
    EXPECT_EQ(d.pending(), 1u);
    EXPECT_EQ(d.feed_bytes("\xA9"), "\xC3\xA9");
    EXPECT_EQ(d.feed_bytes("\xF0\x9F"), "");
    EXPECT_EQ(d.feed_bytes("\xA6"), "");
    EXPECT_EQ(d.feed_bytes("\x99!"), "\xF0\x9F\xA6\x99!");
    EXPECT_EQ(d.pending(), 0u);
}

TEST(StreamingDecoder, ReplacesInvalidBytesLikePython) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-llama-spm.gguf");
    const Tokenizer tok = load_tokenizer(path);
    StreamingDecoder d(tok);
    EXPECT_EQ(d.feed_bytes("\xFF"), "\xEF\xBF\xBD");
    EXPECT_EQ(d.feed_bytes("\xE2\x82"
                           "A"),
              "\xEF\xBF\xBD"
              "A");                                                   // one U+FFFD for E2 82
    EXPECT_EQ(d.feed_bytes("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two
    EXPECT_EQ(d.feed_bytes("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
    EXPECT_EQ(d.feed_bytes("\xF0\x9F"), "");
    EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");
    EXPECT_EQ(sanitize_utf8("ok\x80"), "ok\xEF\xBF\xBD");
}

// A character that SentencePiece spells as four byte tokens comes out whole, after the fourth.
TEST(StreamingDecoder, ByteTokensJoinIntoOneCharacter) {
    MINFER_REQUIRE_FIXTURE(path, "models/stories260K.gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::vector<int32_t> ids = tok.tokenize("\xF0\x9F\xA6\x99", false, false);
    StreamingDecoder d(tok);
    std::vector<std::string> parts;
    for (int32_t id : ids) parts.push_back(d.feed(id));
    ASSERT_GE(parts.size(), 4u);
    for (std::size_t i = 0; i + 1 < parts.size(); ++i)
        EXPECT_EQ(parts[i].find('\xF0'), std::string::npos);
    EXPECT_EQ(parts.back(), "\xF0\x9F\xA6\x99");
    EXPECT_EQ(d.finish(), "");
}

TEST(StreamingDecoder, RejectsOutOfRangeIds) {
    MINFER_REQUIRE_FIXTURE(path, "models/stories260K.gguf");
    const Tokenizer tok = load_tokenizer(path);
    StreamingDecoder d(tok, true);
    EXPECT_EQ(d.feed(1), "<s>");
    try {
        d.feed(512);
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("512"), std::string::npos);
    }
    EXPECT_THROW(d.feed(-1), UsageError);
}

}  // namespace
}  // namespace minfer::test
