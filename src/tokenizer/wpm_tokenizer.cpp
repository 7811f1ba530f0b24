#include "tokenizer/wpm_tokenizer.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace minfer {
namespace {

// The CJK blocks BERT splits into single-character words (the 0x2B920 start is what the
// Hugging Face implementation uses).
bool is_chinese_char(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
           (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
           (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
           (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

std::vector<std::string> wpm_words(std::string_view text) {
    std::vector<std::string> words(1);
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t len = 1;
        uint32_t cp = unicode::decode_or_replacement(text, pos, len);
        pos += len;
        cp = unicode::nfd_base(cp);
        const uint8_t f = unicode::flags(cp);
        if (f & unicode::kWhitespace) {
            if (!words.back().empty()) words.emplace_back();
            continue;
        }
        if (cp == 0 || cp == unicode::kReplacementChar || (f & unicode::kControl)) continue;
        std::string s;
        unicode::append_utf8(s, unicode::to_lower(cp));
        if ((f & unicode::kPunctuation) || (cp < 0x7F && (f & unicode::kSymbol)) ||
            is_chinese_char(cp)) {
            if (!words.back().empty()) words.emplace_back();
            words.back() = std::move(s);
            words.emplace_back();
        } else {
            words.back() += s;
        }
    }
    if (words.back().empty()) words.pop_back();
    return words;
}

void wpm_encode(const Vocabulary& vocab, std::string_view text, std::vector<int32_t>& out) {
    const auto max_len = static_cast<int64_t>(vocab.max_token_length);
    for (const std::string& word : wpm_words(text)) {
        if (word.empty()) continue;
        const std::string marked = "\xE2\x96\x81" + word;
        const auto n = static_cast<int64_t>(marked.size());
        const std::size_t first = out.size();
        for (int64_t i = 0; i < n; ++i) {
            bool found = false;
            for (int64_t j = std::min(n, i + max_len + 1); j > i; --j) {
                const int32_t id = vocab.find(std::string_view(marked).substr(i, j - i));
                if (id != kNoToken) {
                    out.push_back(id);
                    found = true;
                    i = j - 1;
                    break;
                }
            }
            if (!found) {  // the whole word becomes UNK
                out.resize(first);
                break;
            }
        }
        if (out.size() == first && vocab.special.unk != kNoToken) out.push_back(vocab.special.unk);
    }
}

}  // namespace minfer
