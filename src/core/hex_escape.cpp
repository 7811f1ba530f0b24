#include "core/hex_escape.h"

namespace minfer {

int hex_digit_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::optional<uint32_t> read_hex(std::string_view text, std::size_t pos, int digits) {
    if (digits < 1 || digits > 8 || pos > text.size() ||
        text.size() - pos < static_cast<std::size_t>(digits))
        return std::nullopt;
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
        const int d = hex_digit_value(text[pos + static_cast<std::size_t>(i)]);
        if (d < 0) return std::nullopt;
        value = value * 16 + static_cast<uint32_t>(d);
    }
    return value;
}

void append_hex(std::string& out, uint32_t value, int digits, HexCase letters) {
    const char* alphabet = letters == HexCase::kUpper ? "0123456789ABCDEF" : "0123456789abcdef";
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
        out += alphabet[(value >> shift) & 15];
}

bool append_control_escape(std::string& out, char32_t cp, HexCase letters) {
    switch (cp) {
        case '\n':
            out += "\\n";
            return true;
        case '\r':
            out += "\\r";
            return true;
        case '\t':
            out += "\\t";
            return true;
        default:
            if (cp >= 0x20 && cp != 0x7F) return false;
            out += "\\x";
            append_hex(out, static_cast<uint32_t>(cp), 2, letters);
            return true;
    }
}

}  // namespace minfer
