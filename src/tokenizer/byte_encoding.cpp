#include "tokenizer/byte_encoding.h"

#include <array>

#include "tokenizer/unicode.h"

namespace minfer::byte_encoding {
namespace {

struct Tables {
    std::array<uint32_t, 256> codepoint{};
    std::array<std::string, 256> utf8{};
    std::array<int16_t, 324> byte_of_codepoint{};  // code points 0..0x143
};

bool is_printable_as_itself(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

const Tables& tables() {
    static const Tables t = [] {
        Tables out;
        out.byte_of_codepoint.fill(-1);
        uint32_t next_extra = 0x100;
        for (int b = 0; b < 256; ++b) {
            const uint32_t cp = is_printable_as_itself(b) ? static_cast<uint32_t>(b) : next_extra++;
            out.codepoint[b] = cp;
            unicode::append_utf8(out.utf8[b], cp);
            out.byte_of_codepoint[cp] = static_cast<int16_t>(b);
        }
        return out;
    }();
    return t;
}

}  // namespace

uint32_t codepoint_of(uint8_t byte) {
    return tables().codepoint[byte];
}
std::string_view utf8_of(uint8_t byte) {
    return tables().utf8[byte];
}

int byte_of(uint32_t cp) {
    const Tables& t = tables();
    return cp < t.byte_of_codepoint.size() ? t.byte_of_codepoint[cp] : -1;
}

void append_encoded(std::string& out, std::string_view bytes) {
    const Tables& t = tables();
    for (char c : bytes) out += t.utf8[static_cast<uint8_t>(c)];
}

}  // namespace minfer::byte_encoding
