#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace minfer::grammar {
namespace {

constexpr char32_t kMaxForLength[] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};

int encoded_length(char32_t cp) {
    for (int n = 1; n <= 4; ++n) {
        if (cp <= kMaxForLength[n]) return n;
    }
    return 4;
}

// The bytes of cp's UTF-8 form, n of them.
std::vector<uint8_t> encode(char32_t cp, int n) {
    std::vector<uint8_t> out(static_cast<std::size_t>(n));
    static constexpr uint8_t kLead[] = {0, 0x00, 0xC0, 0xE0, 0xF0};
    for (int i = n - 1; i > 0; --i) {
        out[static_cast<std::size_t>(i)] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
        cp >>= 6;
    }
    out[0] = static_cast<uint8_t>(kLead[n] | cp);
    return out;
}

// lo..hi all encode to n bytes. Splits the range until each byte position of the encodings
// varies over a whole range independently of the others.
void split(char32_t lo, char32_t hi, int n, std::vector<std::vector<ByteRange>>& out) {
    for (int i = 1; i < n; ++i) {
        const char32_t low_bits = (char32_t{1} << (6 * i)) - 1;  // the last i bytes' payload
        if ((lo & ~low_bits) == (hi & ~low_bits)) continue;
        if ((lo & low_bits) != 0) {
            split(lo, lo | low_bits, n, out);
            split((lo | low_bits) + 1, hi, n, out);
            return;
        }
        if ((hi & low_bits) != low_bits) {
            split(lo, (hi & ~low_bits) - 1, n, out);
            split(hi & ~low_bits, hi, n, out);
            return;
        }
    }
    const auto a = encode(lo, n), b = encode(hi, n);
    std::vector<ByteRange> seq;
    for (int i = 0; i < n; ++i)
        seq.emplace_back(a[static_cast<std::size_t>(i)], b[static_cast<std::size_t>(i)]);
    out.push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodepointRange>& ranges) {
    std::vector<std::vector<ByteRange>> out;
    for (const CodepointRange& r : ranges) {
        // Pieces of one encoded length each.
        char32_t lo = r.lo;
        while (lo <= r.hi) {
            const int n = encoded_length(lo);
            const char32_t hi = std::min(r.hi, kMaxForLength[n]);
            split(lo, hi, n, out);
            if (hi == r.hi) break;
            lo = hi + 1;
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.size() < b.size(); });
    return out;
}

}  // namespace minfer::grammar
