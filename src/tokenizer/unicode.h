#pragma once
// Code point classes, case and accent folding, and the lenient UTF-8 decoding that llama.cpp's
// tokenizers use (so that minfer splits and normalises text exactly as they do).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace minfer::unicode {

inline constexpr uint32_t kReplacementChar = 0xFFFD;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// General-category classes (C includes unassigned code points) and White_Space.
enum CpFlags : uint8_t {
    kLetter = 1,
    kNumber = 2,
    kPunctuation = 4,
    kSymbol = 8,
    kMark = 16,
    kControl = 32,
    kSeparator = 64,
    kWhitespace = 128,
};

// Flags of a code point; 0 past U+10FFFF.
uint8_t flags(uint32_t cp);
inline bool is_letter(uint32_t cp) {
    return flags(cp) & kLetter;
}
inline bool is_number(uint32_t cp) {
    return flags(cp) & kNumber;
}
inline bool is_whitespace(uint32_t cp) {
    return flags(cp) & kWhitespace;
}

// First code point of the lowercase mapping (as Python's str.lower()[0]).
uint32_t to_lower(uint32_t cp);
// First code point of the NFD decomposition: the base letter of an accented one.
uint32_t nfd_base(uint32_t cp);
// The Unicode version the tables were generated from.
const char* tables_version();

// Bytes of the sequence a lead byte starts, llama.cpp's way: continuation and invalid lead
// bytes count 1, 0xF8..0xFF count 4.
inline std::size_t sequence_length(unsigned char lead) {
    static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kLengths[lead >> 4];
}

// Decodes one code point at `pos` leniently (overlong forms and surrogates are accepted, as by
// llama.cpp). Returns false for an invalid sequence or one beyond U+10FFFF; `length` is then 1.
bool decode(std::string_view text, std::size_t pos, uint32_t& cp, std::size_t& length);
// decode()'s code point, or U+FFFD for an invalid sequence (length 1).
inline uint32_t decode_or_replacement(std::string_view text, std::size_t pos, std::size_t& length) {
    uint32_t cp = 0;
    return decode(text, pos, cp, length) ? cp : kReplacementChar;
}

using minfer::append_utf8;  // core/utf8.h

// True when `text` decodes leniently with no invalid byte and re-encodes to itself (no overlong
// forms): tokenizing can then work on it in place.
bool is_canonical(std::string_view text);
// Decodes leniently and re-encodes; each invalid byte becomes U+FFFD (what llama.cpp does before
// pre-tokenizing).
std::string canonicalize(std::string_view text);

using minfer::is_valid_utf8;  // core/utf8.h: strict UTF-8

}  // namespace minfer::unicode
