#include "core/terminal_text.h"

#include "core/hex_escape.h"
#include "core/utf8.h"

namespace minfer {
std::string escape_for_terminal(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        char32_t cp = 0;
        const std::size_t length = decode_utf8(text, i, cp);
        if (length == 0) {
            out += "\\x";
            append_hex(out, static_cast<unsigned char>(text[i]), 2);
            ++i;
            continue;
        }
        if (cp >= 0x80 && cp <= 0x9f) {
            out += "\\u";
            append_hex(out, static_cast<uint32_t>(cp), 4);
        } else if (!append_control_escape(out, cp)) {
            out.append(text.substr(i, length));
        }
        i += length;
    }
    return out;
}

}  // namespace minfer
