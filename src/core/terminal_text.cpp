#include "core/terminal_text.h"

#include "core/utf8.h"

namespace minfer {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void append_hex_byte(std::string& out, unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
}

}  // namespace

std::string escape_for_terminal(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        const std::size_t length = decode_utf8(text, i, cp);
        if (length == 0) {
            append_hex_byte(out, static_cast<unsigned char>(text[i]));
            ++i;
            continue;
        }
        if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp < 0x20 || cp == 0x7f) {
            append_hex_byte(out, static_cast<unsigned char>(cp));
        } else if (cp >= 0x80 && cp <= 0x9f) {
            out += "\\u00";
            out += kHex[cp >> 4];
            out += kHex[cp & 15];
        } else {
            out.append(text.substr(i, length));
        }
        i += length;
    }
    return out;
}

}  // namespace minfer
