#include "tokenizer/fast_splitters.h"

#include "tokenizer/unicode.h"

namespace minfer {
namespace {

// Reads code points of one piece; positions are byte offsets into the whole text.
class PieceReader {
  public:
    PieceReader(std::string_view text, uint32_t end) : text_(text.substr(0, end)), end_(end) {}

    bool in_range(uint32_t pos) const { return pos < end_; }
    // Code point at pos and its length; callers check in_range first.
    uint32_t at(uint32_t pos, uint32_t& length) const {
        const auto b = static_cast<unsigned char>(text_[pos]);
        if (b < 0x80) {
            length = 1;
            return b;
        }
        std::size_t len = 1;
        const uint32_t cp = unicode::decode_or_replacement(text_, pos, len);
        length = static_cast<uint32_t>(len);
        return cp;
    }
    // Flags of the code point at pos; 0 past the piece (llama.cpp's OUT_OF_RANGE).
    uint8_t flags_at(uint32_t pos) const {
        if (!in_range(pos)) return 0;
        uint32_t len = 0;
        return unicode::flags(at(pos, len));
    }
    uint32_t next(uint32_t pos) const {
        uint32_t len = 0;
        at(pos, len);
        return pos + len;
    }
    char byte(uint32_t pos) const { return in_range(pos) ? text_[pos] : '\0'; }

  private:
    std::string_view text_;
    uint32_t end_;
};

constexpr uint8_t kLetterNumberSpace = unicode::kLetter | unicode::kNumber | unicode::kWhitespace;

bool is_other(uint8_t f) {
    return f != 0 && (f & kLetterNumberSpace) == 0;
}
bool is_cr_lf(char c) {
    return c == '\r' || c == '\n';
}

// Length of 's 't 're 've 'm 'll 'd at pos (case-insensitive when asked), or 0.
uint32_t contraction_length(const PieceReader& r, uint32_t pos, bool any_case) {
    if (r.byte(pos) != '\'' || !r.in_range(pos + 1)) return 0;
    const auto lower = [&](char c) {
        return any_case && c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    };
    const char c1 = lower(r.byte(pos + 1));
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
    if (!r.in_range(pos + 2)) return 0;
    const char c2 = lower(r.byte(pos + 2));
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
    return 0;
}

// Skips code points while `keep(flags)` holds; returns the first position where it does not.
template <class Keep>
uint32_t skip_while(const PieceReader& r, uint32_t pos, Keep keep) {
    while (r.in_range(pos)) {
        uint32_t len = 0;
        if (!keep(unicode::flags(r.at(pos, len)))) break;
        pos += len;
    }
    return pos;
}

}  // namespace

void split_gpt2(std::string_view text, uint32_t begin, uint32_t end, std::vector<uint32_t>& ends) {
    const PieceReader r(text, end);
    uint32_t pos = begin;
    while (pos < end) {
        if (const uint32_t n = contraction_length(r, pos, false)) {
            pos += n;
            ends.push_back(pos);
            continue;
        }
        uint32_t len = 0;
        const uint32_t cp = r.at(pos, len);
        const bool space = cp == ' ';
        const uint32_t body = space ? pos + 1 : pos;  // where \p{L}+ etc. would start
        const uint8_t f = r.flags_at(body);
        if (f & unicode::kLetter) {
            pos = skip_while(r, body, [](uint8_t g) { return (g & unicode::kLetter) != 0; });
        } else if (f & unicode::kNumber) {
            pos = skip_while(r, body, [](uint8_t g) { return (g & unicode::kNumber) != 0; });
        } else if (is_other(f)) {
            pos = skip_while(r, body, is_other);
        } else {
            // \s+(?!\S): a run of spaces, less its last one when a non-space follows
            uint32_t run_end = pos, last_start = pos;
            int count = 0;
            while (r.in_range(run_end)) {
                uint32_t l = 0;
                if (!(unicode::flags(r.at(run_end, l)) & unicode::kWhitespace)) break;
                last_start = run_end;
                run_end += l;
                ++count;
            }
            if (count > 1 && r.in_range(run_end)) {
                pos = last_start;
            } else if (count > 0) {
                pos = run_end;
            } else {
                pos += len;  // no alternative matches: the code point is a word of its own
            }
        }
        ends.push_back(pos);
    }
}

void split_llama3(std::string_view text, uint32_t begin, uint32_t end, int max_digits,
                  std::vector<uint32_t>& ends) {
    const PieceReader r(text, end);
    uint32_t pos = begin;
    while (pos < end) {
        if (const uint32_t n = contraction_length(r, pos, true)) {
            pos += n;
            ends.push_back(pos);
            continue;
        }
        uint32_t len = 0;
        const uint32_t cp = r.at(pos, len);
        const uint8_t f = unicode::flags(cp);
        const bool cr_lf = cp == '\r' || cp == '\n';

        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (!cr_lf && !(f & unicode::kNumber)) {
            const uint32_t body = (f & unicode::kLetter) ? pos : pos + len;
            if (r.flags_at(body) & unicode::kLetter) {
                pos = skip_while(r, body, [](uint8_t g) { return (g & unicode::kLetter) != 0; });
                ends.push_back(pos);
                continue;
            }
        }
        // \p{N}{1,D}
        if (f & unicode::kNumber) {
            int digits = 0;
            while (r.in_range(pos) && (r.flags_at(pos) & unicode::kNumber)) {
                pos = r.next(pos);
                if (++digits == max_digits) {
                    ends.push_back(pos);
                    digits = 0;
                }
            }
            if (digits > 0) ends.push_back(pos);
            continue;
        }
        // ' '?[^\s\p{L}\p{N}]+[\r\n]*
        const uint32_t body = cp == ' ' ? pos + 1 : pos;
        if (is_other(r.flags_at(body))) {
            pos = skip_while(r, body, is_other);
            while (r.in_range(pos) && is_cr_lf(r.byte(pos))) ++pos;
            ends.push_back(pos);
            continue;
        }
        // \s*[\r\n]+ | \s+(?!\S) | \s+
        uint32_t run_end = pos, last_start = pos, last_cr_lf_end = 0;
        int count = 0;
        while (r.in_range(run_end)) {
            uint32_t l = 0;
            const uint32_t c = r.at(run_end, l);
            if (!(unicode::flags(c) & unicode::kWhitespace)) break;
            last_start = run_end;
            run_end += l;
            if (c == '\r' || c == '\n') last_cr_lf_end = run_end;
            ++count;
        }
        if (last_cr_lf_end > 0) {
            pos = last_cr_lf_end;
        } else if (count > 1 && r.in_range(run_end)) {
            pos = last_start;
        } else if (count > 0) {
            pos = run_end;
        } else {
            pos += len;
        }
        ends.push_back(pos);
    }
}

}  // namespace minfer
