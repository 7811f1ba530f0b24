// Token ids back to text, as llama.cpp's token_to_piece and detokenize.

#include <cstdio>
#include <string>

#include "tokenizer/byte_encoding.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

std::string unescape_spaces(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
            out += ' ';
            i += 2;
        } else {
            out += text[i];
        }
    }
    return out;
}

// Byte-level text back to bytes; a code point that stands for no byte is shown as
// "[UNK_BYTE_0x<its UTF-8 in hex><the token text>]", exactly as llama.cpp does.
std::string decode_byte_level(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t len = 1;
        const uint32_t cp = unicode::decode_or_replacement(text, pos, len);
        pos += len;
        const int byte = byte_encoding::byte_of(cp);
        if (byte >= 0) {
            out += static_cast<char>(byte);
            continue;
        }
        std::string utf8;
        unicode::append_utf8(utf8, cp);
        out += "[UNK_BYTE_0x";
        for (char c : utf8) {
            char hex[3];
            std::snprintf(hex, sizeof(hex), "%02x", static_cast<unsigned char>(c));
            out += hex;
        }
        out += text;
        out += ']';
    }
    return out;
}

}  // namespace

std::string token_piece(const Vocabulary& vocab, int32_t id, bool show_special) {
    const uint16_t a = vocab.attrs[id];
    const std::string_view text = vocab.texts[id];
    if (!show_special && (a & (attr::kUnknown | attr::kControl))) return {};
    if (a & (attr::kUnknown | attr::kControl | attr::kUserDefined)) return std::string(text);
    switch (vocab.kind) {
        case VocabKind::Spm:
        case VocabKind::Wpm:
            if (a & attr::kNormal) return unescape_spaces(text);
            if (a & attr::kByte) return std::string(1, static_cast<char>(byte_token_value(text)));
            return {};
        case VocabKind::Bpe:
            if (a & attr::kNormal) return decode_byte_level(text);
            return {};  // byte, unused and undefined tokens have no text
    }
    return {};
}

// Hugging Face's clean_up_tokenization, in llama.cpp's three passes: " ?" " !" " ." " ,"
// lose their space; a lone quote between spaces loses both; " 's" " 'm" " 're" " 've" lose it.
void clean_up_spaces(std::string& text) {
    const auto n1 = static_cast<int64_t>(text.size());
    int64_t total = n1 ? 1 : 0;
    for (int64_t i = 1; i < n1; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
        text[total++] = x;
    }
    const int64_t n2 = total;
    total = n2 ? 1 : 0;
    for (int64_t i = 1; i < n2; ++i) {
        const char x = text[i];
        if (x == '\'' && i + 1 < n2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            --total;
            text[++i] = '\0';  // the next space goes too (and no longer counts as a space)
        }
        text[total++] = x;
    }
    const int64_t n3 = total;
    total = n3 ? 1 : 0;
    for (int64_t i = 1; i < n3; ++i) {
        const char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < n3) {
            const char x1 = text[i + 1];
            const char x2 = i + 2 < n3 ? text[i + 2] : '\0';
            if (x1 == 's' || x1 == 'm' || (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) {
                --total;
            }
        }
        text[total++] = x;
    }
    text.resize(static_cast<std::size_t>(total));
}

}  // namespace minfer
