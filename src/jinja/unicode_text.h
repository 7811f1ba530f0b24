#pragma once
// Python's str semantics on UTF-8 text: code-point decoding, case mapping, whitespace, line
// boundaries and printability, as the template engine needs them. Strings stay UTF-8 bytes;
// invalid bytes decode as U+FFFD so that every byte string has a defined length.
//
// Case mapping covers Latin (incl. Latin-1, Extended-A, Extended Additional), Greek, Cyrillic,
// Armenian and fullwidth Latin letters; other scripts are left unchanged (Python has full tables).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace minfer::jinja::unicode {

// Code points of a UTF-8 string (invalid sequences become U+FFFD, one per bad byte).
std::vector<char32_t> decode(std::string_view text);
// UTF-8 of code points.
std::string encode(const std::vector<char32_t>& code_points);
using minfer::append_utf8;  // core/utf8.h
// Number of code points (Python len()).
std::size_t length(std::string_view text);
using minfer::is_valid_utf8;  // core/utf8.h: strict UTF-8

// str.isspace() for one code point (also what Python's regex \s matches).
bool is_space(char32_t cp);
// A line boundary of str.splitlines() (\r\n counts as one, handled by split_lines).
bool is_line_break(char32_t cp);
// str.isprintable() for one code point (approximate outside the common blocks).
bool is_printable(char32_t cp);
// A character of regex \w (letters, digits, underscore; approximate outside common blocks).
bool is_word_char(char32_t cp);
bool is_cased(char32_t cp);

std::string to_upper(std::string_view text);
std::string to_lower(std::string_view text);
// str.capitalize(): first character upper-cased, the rest lower-cased.
std::string capitalize(std::string_view text);
// str.title(): a cased character after an uncased one is upper-cased, others lower-cased.
std::string python_title(std::string_view text);

// str.strip/lstrip/rstrip: with no chars, strips whitespace; else strips any of the chars.
std::string strip(std::string_view text, const std::string* chars, bool left, bool right);
// str.splitlines() (without keepends).
std::vector<std::string> split_lines(std::string_view text);

}  // namespace minfer::jinja::unicode
