#include "tokenizer/streaming_decoder.h"

#include "tokenizer/tokenizer.h"

namespace minfer {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

enum class Scan { Complete, Invalid, Truncated };

// Looks at the sequence starting at `pos` (strict UTF-8, Unicode's table 3-7). `length` is the
// sequence length when Complete, else the length of the maximal valid prefix (at least 1).
Scan scan(std::string_view s, std::size_t pos, std::size_t& length) {
    const auto b0 = static_cast<unsigned char>(s[pos]);
    length = 1;
    if (b0 < 0x80) return Scan::Complete;
    std::size_t need = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return Scan::Invalid;
    }
    for (std::size_t k = 1; k <= need; ++k) {
        if (pos + k >= s.size()) return Scan::Truncated;
        const auto b = static_cast<unsigned char>(s[pos + k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) return Scan::Invalid;
        length = k + 1;
    }
    return Scan::Complete;
}

// Moves the complete part of `pending` (valid text, with invalid bytes replaced) into the result,
// keeping a truncated final sequence unless `at_end`.
std::string drain(std::string& pending, bool at_end) {
    std::string out;
    std::size_t pos = 0;
    while (pos < pending.size()) {
        std::size_t length = 1;
        const Scan result = scan(pending, pos, length);
        if (result == Scan::Truncated && !at_end) break;
        if (result == Scan::Complete) {
            out.append(pending, pos, length);
        } else {
            out += kReplacement;
        }
        pos += length;
    }
    pending.erase(0, pos);
    return out;
}

}  // namespace

StreamingDecoder::StreamingDecoder(const Tokenizer& tokenizer, bool show_special)
    : tokenizer_(&tokenizer), show_special_(show_special) {}

std::string StreamingDecoder::feed(int32_t id) {
    return feed_bytes(tokenizer_->token_to_piece(id, show_special_));
}

std::string StreamingDecoder::feed_bytes(std::string_view bytes) {
    pending_ += bytes;
    return drain(pending_, false);
}

std::string StreamingDecoder::finish() {
    return drain(pending_, true);
}

std::string sanitize_utf8(std::string_view bytes) {
    std::string pending(bytes);
    return drain(pending, true);
}

}  // namespace minfer
