#include "tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_data.h"

namespace minfer::unicode {
namespace {

// One byte of flags per code point, expanded once from the run-length table (1.1 MB).
const std::vector<uint8_t>& flag_table() {
    static const std::vector<uint8_t> table = [] {
        std::vector<uint8_t> t(kMaxCodepoint + 1, 0);
        for (std::size_t i = 0; i < data::kFlagRangesSize; ++i) {
            const uint32_t begin = data::kFlagRanges[i].start;
            const uint32_t end =
                i + 1 < data::kFlagRangesSize ? data::kFlagRanges[i + 1].start : kMaxCodepoint + 1;
            std::fill(t.begin() + begin, t.begin() + end, data::kFlagRanges[i].flags);
        }
        return t;
    }();
    return table;
}

uint32_t lookup_pair(const data::CodepointPair* pairs, std::size_t n, uint32_t cp) {
    const data::CodepointPair* end = pairs + n;
    const auto* it = std::lower_bound(
        pairs, end, cp, [](const data::CodepointPair& p, uint32_t c) { return p.from < c; });
    return it != end && it->from == cp ? it->to : cp;
}

}  // namespace

uint8_t flags(uint32_t cp) {
    static const std::vector<uint8_t>& table = flag_table();
    return cp <= kMaxCodepoint ? table[cp] : 0;
}

uint32_t to_lower(uint32_t cp) {
    return lookup_pair(data::kLowercase, data::kLowercaseSize, cp);
}
uint32_t nfd_base(uint32_t cp) {
    return lookup_pair(data::kNfdBase, data::kNfdBaseSize, cp);
}
const char* tables_version() {
    return data::kUnicodeVersion;
}

bool decode(std::string_view text, std::size_t pos, uint32_t& cp, std::size_t& length) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
    const auto is_cont = [&](std::size_t i) {
        return pos + i < text.size() && (byte(i) & 0xC0) == 0x80;
    };
    const unsigned char b0 = byte(0);
    length = 1;
    if (b0 < 0x80) {
        cp = b0;
        return true;
    }
    if ((b0 & 0xE0) == 0xC0 && is_cont(1)) {
        cp = ((b0 & 0x1Fu) << 6) | (byte(1) & 0x3Fu);
        length = 2;
        return true;
    }
    if ((b0 & 0xF0) == 0xE0 && is_cont(1) && is_cont(2)) {
        cp = ((b0 & 0x0Fu) << 12) | ((byte(1) & 0x3Fu) << 6) | (byte(2) & 0x3Fu);
        length = 3;
        return true;
    }
    if ((b0 & 0xF8) == 0xF0 && is_cont(1) && is_cont(2) && is_cont(3)) {
        const uint32_t v = ((b0 & 0x07u) << 18) | ((byte(1) & 0x3Fu) << 12) |
                           ((byte(2) & 0x3Fu) << 6) | (byte(3) & 0x3Fu);
        if (v > kMaxCodepoint) return false;  // llama.cpp throws here; minfer replaces it
        cp = v;
        length = 4;
        return true;
    }
    return false;
}

namespace {
std::size_t encoded_length(uint32_t cp) {
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}
}  // namespace

bool is_canonical(std::string_view text) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        if (static_cast<unsigned char>(text[pos]) < 0x80) {
            ++pos;
            continue;
        }
        uint32_t cp = 0;
        std::size_t len = 0;
        if (!decode(text, pos, cp, len) || encoded_length(cp) != len) return false;
        pos += len;
    }
    return true;
}

std::string canonicalize(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 16);
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t len = 0;
        append_utf8(out, decode_or_replacement(text, pos, len));
        pos += len;
    }
    return out;
}

}  // namespace minfer::unicode
