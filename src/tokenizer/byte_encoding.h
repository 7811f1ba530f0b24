#pragma once
// GPT-2's byte-level encoding: every byte is shown as one printable code point (0x21..0x7E,
// 0xA1..0xAC and 0xAE..0xFF as themselves, the other 68 bytes as U+0100..U+0143 in order), so
// byte-level BPE vocabularies store "Ġthe" for " the".

#include <cstdint>
#include <string>
#include <string_view>

namespace minfer::byte_encoding {

// The code point that stands for `byte`.
uint32_t codepoint_of(uint8_t byte);
// Its UTF-8 form (1 or 2 bytes).
std::string_view utf8_of(uint8_t byte);
// The byte a code point stands for, or -1 if it stands for none.
int byte_of(uint32_t cp);
// Encodes raw bytes into their byte-level form.
void append_encoded(std::string& out, std::string_view bytes);

}  // namespace minfer::byte_encoding
