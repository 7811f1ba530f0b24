#pragma once
// Hexadecimal digits and C-style escapes, the one home of what the grammar and regex parsers, the
// Jinja lexer, URLs, byte tokens, GGUF strings and the terminal escaper all need.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace minfer {

// 0..15 for '0'-'9', 'a'-'f', 'A'-'F'; -1 for any other character.
int hex_digit_value(char c);

// The value of exactly `digits` (1..8) hexadecimal digits starting at text[pos]; nullopt when
// fewer characters are there or one of them is not a hexadecimal digit.
std::optional<uint32_t> read_hex(std::string_view text, std::size_t pos, int digits);

enum class HexCase { kLower, kUpper };

// Appends the low `digits` (1..8) hexadecimal digits of value, most significant first.
void append_hex(std::string& out, uint32_t value, int digits, HexCase letters = HexCase::kLower);

// Appends the C escape of a control character, \n \r \t or \xNN for the other C0 controls and
// DEL, and returns true; returns false and appends nothing for any other code point (quotes,
// backslashes and C1 controls are each caller's own choice).
bool append_control_escape(std::string& out, char32_t cp, HexCase letters = HexCase::kLower);

}  // namespace minfer
