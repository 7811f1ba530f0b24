// The shared UTF-8 helpers (core/utf8.h).

#include <gtest/gtest.h>

#include "core/utf8.h"

namespace minfer {
namespace {

TEST(Utf8, EncodesEveryLength) {
    std::string out;
    for (char32_t cp : {U'a', U'é', U'€', U'😀'}) append_utf8(out, cp);
    EXPECT_EQ(out, "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

TEST(Utf8, ValidatesStrictly) {
    EXPECT_TRUE(is_valid_utf8(""));
    EXPECT_TRUE(is_valid_utf8("plain ascii"));
    EXPECT_TRUE(is_valid_utf8("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"));
    EXPECT_FALSE(is_valid_utf8("\xC3"));              // truncated
    EXPECT_FALSE(is_valid_utf8("\xE2\x82"));          // truncated
    EXPECT_FALSE(is_valid_utf8("\xC0\xAF"));          // overlong '/'
    EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
    EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));  // past U+10FFFF
    EXPECT_FALSE(is_valid_utf8("\x80"));              // lone continuation
    EXPECT_FALSE(is_valid_utf8("\xFF"));
}

}  // namespace
}  // namespace minfer
