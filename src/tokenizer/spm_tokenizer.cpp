#include "tokenizer/spm_tokenizer.h"

#include <queue>
#include <string>

#include "core/error.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/unicode.h"

namespace minfer {
namespace {

constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

struct Symbol {
    int32_t prev;
    int32_t next;
    uint32_t begin;  // byte offset in the text
    uint32_t size;   // bytes; 0 once merged into its left neighbour
};

struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    uint32_t size;
};

// Highest score first, then leftmost (llama.cpp's llm_bigram_spm::comparator).
struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};

bool space_only_leads(std::string_view text) {
    for (std::size_t k = text.find(kSpace, 1); k != std::string_view::npos;
         k = text.find(kSpace, k + 1)) {
        if (k < 3 || text.substr(k - 3, 3) != kSpace) return false;
    }
    return true;
}

}  // namespace

SpmTokenizer::SpmTokenizer(const Vocabulary& vocab) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const char name[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
        int32_t id = vocab.find(std::string_view(name, sizeof(name)));
        if (id == kNoToken) {
            const char raw = static_cast<char>(b);
            id = vocab.find(std::string_view(&raw, 1));
        }
        byte_tokens_[b] = id != kNoToken ? id : vocab.special.unk;
    }
    words_are_independent_ = true;
    for (std::string_view t : vocab.texts) {
        if (!space_only_leads(t)) {
            words_are_independent_ = false;
            break;
        }
    }
}

void SpmTokenizer::encode(const Vocabulary& vocab, std::string_view text, std::vector<int32_t>& out,
                          TokenCache& cache) const {
    if (!words_are_independent_) {
        encode_chunk(vocab, text, out);
        return;
    }
    // Cut before every U+2581 that starts a symbol and does not follow another U+2581.
    std::size_t chunk_begin = 0;
    std::size_t pos = 0;
    const auto flush = [&](std::size_t end) {
        if (end == chunk_begin) return;
        const std::string_view chunk = text.substr(chunk_begin, end - chunk_begin);
        if (!cache.find(chunk, out)) {
            const std::size_t before = out.size();
            encode_chunk(vocab, chunk, out);
            cache.put(chunk, std::span<const int32_t>(out).subspan(before));
        }
        chunk_begin = end;
    };
    while (pos < text.size()) {
        if (pos > 0 && text.compare(pos, 3, kSpace) == 0 &&
            (pos < 3 || text.compare(pos - 3, 3, kSpace) != 0)) {
            flush(pos);
        }
        pos += std::min(unicode::sequence_length(static_cast<unsigned char>(text[pos])),
                        text.size() - pos);
    }
    flush(text.size());
}

void SpmTokenizer::encode_chunk(const Vocabulary& vocab, std::string_view text,
                                std::vector<int32_t>& out) const {
    if (text.size() >= INT32_MAX) {
        throw LimitError(concat("text of ", text.size(), " bytes is too long to tokenize"));
    }
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t n = std::min(
            unicode::sequence_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
        const auto index = static_cast<int32_t>(symbols.size());
        symbols.push_back(Symbol{index - 1, pos + n == text.size() ? -1 : index + 1,
                                 static_cast<uint32_t>(pos), static_cast<uint32_t>(n)});
        pos += n;
    }

    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto try_add = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const uint32_t size = symbols[left].size + symbols[right].size;
        const int32_t id = vocab.find(text.substr(symbols[left].begin, size));
        if (id == kNoToken) return;
        queue.push(Bigram{vocab.scores[id], left, right, size});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[bigram.left];
        Symbol& right = symbols[bigram.right];
        if (left.size == 0 || right.size == 0 || left.size + right.size != bigram.size) continue;
        left.size += right.size;
        right.size = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = bigram.left;
        try_add(left.prev, bigram.left);
        try_add(bigram.left, left.next);
    }

    for (int32_t i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) {
        const std::string_view piece = text.substr(symbols[i].begin, symbols[i].size);
        const int32_t id = vocab.find(piece);
        if (id != kNoToken) {
            out.push_back(id);
            continue;
        }
        for (char c : piece) {
            const int32_t byte_id = byte_tokens_[static_cast<uint8_t>(c)];
            if (byte_id == kNoToken) {
                throw UnsupportedError(concat("the vocabulary has no token for byte 0x", std::hex,
                                              static_cast<int>(static_cast<uint8_t>(c)),
                                              " and no unknown token"));
            }
            out.push_back(byte_id);
        }
    }
}

}  // namespace minfer
