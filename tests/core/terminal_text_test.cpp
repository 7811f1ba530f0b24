// escape_for_terminal (core/terminal_text.h): what may reach a terminal from a file or a user.

#include <gtest/gtest.h>

#include "core/terminal_text.h"
#include "core/utf8.h"

namespace minfer {
namespace {

using namespace std::string_literals;

TEST(EscapeForTerminal, KeepsPrintableUtf8) {
    EXPECT_EQ(escape_for_terminal(""), "");
    EXPECT_EQ(escape_for_terminal("blk.0.attn_q.weight"), "blk.0.attn_q.weight");
    // é, €, 😀, a no-break space (U+00A0, the first code point after the C1 block)
    const std::string unicode = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xC2\xA0";
    EXPECT_EQ(escape_for_terminal(unicode), unicode);
    EXPECT_EQ(escape_for_terminal(" ~!\"#'"), " ~!\"#'");
}

TEST(EscapeForTerminal, EscapesC0ControlsAndDel) {
    EXPECT_EQ(escape_for_terminal("a\nb\rc\td"), "a\\nb\\rc\\td");
    EXPECT_EQ(escape_for_terminal("\x1b[31mred\n"), "\\x1b[31mred\\n");
    EXPECT_EQ(escape_for_terminal("\x07\x08\x7f"), "\\x07\\x08\\x7f");
    EXPECT_EQ(escape_for_terminal("a\0b"s), "a\\x00b");
    EXPECT_EQ(escape_for_terminal("\x1f"), "\\x1f");
}

TEST(EscapeForTerminal, EscapesC1ControlsByCodePoint) {
    // U+009B is CSI, the one-byte form of ESC [; U+0085 is NEXT LINE.
    EXPECT_EQ(escape_for_terminal("\xC2\x9B"
                                  "31m"),
              "\\u009b31m");
    EXPECT_EQ(escape_for_terminal("a\xC2\x85"
                                  "b"),
              "a\\u0085b");
    EXPECT_EQ(escape_for_terminal("\xC2\x80\xC2\x9F"), "\\u0080\\u009f");
}

TEST(EscapeForTerminal, EscapesEachInvalidByte) {
    EXPECT_EQ(escape_for_terminal("\x9B"
                                  "31m"),
              "\\x9b31m");  // a raw 8-bit CSI byte
    EXPECT_EQ(escape_for_terminal("\xFF\xFE"), "\\xff\\xfe");
    EXPECT_EQ(escape_for_terminal("\xC3"), "\\xc3");  // truncated at the end
    EXPECT_EQ(escape_for_terminal("\xE2\x82"
                                  "x"),
              "\\xe2\\x82x");                                           // truncated before ASCII
    EXPECT_EQ(escape_for_terminal("\xC0\xAF"), "\\xc0\\xaf");           // overlong '/'
    EXPECT_EQ(escape_for_terminal("\xED\xA0\x80"), "\\xed\\xa0\\x80");  // surrogate U+D800
    EXPECT_EQ(escape_for_terminal("\xF4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // > U+10FFFF
    // A valid sequence right after an invalid byte is kept.
    EXPECT_EQ(escape_for_terminal("\x80\xC3\xA9"), "\\x80\xC3\xA9");
}

TEST(EscapeForTerminal, KeepsBackslashesSoEscapedTextPassesThrough) {
    EXPECT_EQ(escape_for_terminal("C:\\models\\x.gguf"), "C:\\models\\x.gguf");
    EXPECT_EQ(escape_for_terminal("\"a\\nb\""), "\"a\\nb\"");
    EXPECT_EQ(escape_for_terminal(escape_for_terminal("\x1b\n")), "\\x1b\\n");
}

// Every one- and two-byte input comes out as valid UTF-8 with no control character in it.
TEST(EscapeForTerminal, OutputNeverHoldsAControlOrInvalidUtf8) {
    for (int a = 0; a < 256; ++a) {
        for (int b = -1; b < 256; ++b) {
            std::string input(1, static_cast<char>(a));
            if (b >= 0) input += static_cast<char>(b);
            const std::string out = escape_for_terminal(input);
            ASSERT_TRUE(is_valid_utf8(out)) << a << " " << b;
            for (std::size_t i = 0; i < out.size();) {
                char32_t cp = 0;
                const std::size_t n = decode_utf8(out, i, cp);
                ASSERT_FALSE(cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) << a << " " << b;
                i += n;
            }
        }
    }
}

}  // namespace
}  // namespace minfer
