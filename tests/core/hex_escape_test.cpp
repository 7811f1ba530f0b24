// core/hex_escape.h: hexadecimal digits and control-character escapes.

#include <gtest/gtest.h>

#include "core/hex_escape.h"

namespace minfer {
namespace {

TEST(HexEscape, DigitValues) {
    EXPECT_EQ(hex_digit_value('0'), 0);
    EXPECT_EQ(hex_digit_value('9'), 9);
    EXPECT_EQ(hex_digit_value('a'), 10);
    EXPECT_EQ(hex_digit_value('F'), 15);
    for (char c : std::string_view("gG/:@`\0 x", 9)) EXPECT_EQ(hex_digit_value(c), -1) << int(c);
}

TEST(HexEscape, ReadsExactlyTheDigitsAsked) {
    EXPECT_EQ(read_hex("41", 0, 2), 0x41u);
    EXPECT_EQ(read_hex("\\u00e9!", 2, 4), 0xE9u);
    EXPECT_EQ(read_hex("10FFFF", 0, 6), 0x10FFFFu);
    EXPECT_EQ(read_hex("FFFFFFFF", 0, 8), 0xFFFFFFFFu);
    EXPECT_EQ(read_hex("123", 1, 2), 0x23u);
    EXPECT_FALSE(read_hex("4", 0, 2));   // too few characters
    EXPECT_FALSE(read_hex("4g", 0, 2));  // not a digit
    EXPECT_FALSE(read_hex("12", 3, 1));  // past the end
    EXPECT_FALSE(read_hex("123456789", 0, 9));
    EXPECT_FALSE(read_hex("1", 0, 0));
}

TEST(HexEscape, AppendsDigitsInEitherCase) {
    std::string out;
    append_hex(out, 0xAB, 2);
    append_hex(out, 0xCD, 4, HexCase::kUpper);
    append_hex(out, 0x1F600, 8);
    EXPECT_EQ(out, "ab00CD0001f600");
}

TEST(HexEscape, EscapesControlsOnly) {
    std::string out;
    for (char32_t cp : {U'\n', U'\r', U'\t', U'\x1b', U'\0', U'\x7f'})
        EXPECT_TRUE(append_control_escape(out, cp));
    EXPECT_EQ(out, "\\n\\r\\t\\x1b\\x00\\x7f");
    out.clear();
    EXPECT_TRUE(append_control_escape(out, 0x1B, HexCase::kUpper));
    EXPECT_EQ(out, "\\x1B");
    for (char32_t cp : {U' ', U'a', U'"', U'\\', U'\x80', U'\x9f', U'é'})
        EXPECT_FALSE(append_control_escape(out, cp));
    EXPECT_EQ(out, "\\x1B");
}

}  // namespace
}  // namespace minfer
