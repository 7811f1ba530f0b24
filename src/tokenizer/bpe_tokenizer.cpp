#include "tokenizer/bpe_tokenizer.h"

#include <queue>
#include <string>

#include "core/error.h"
#include "gguf/gguf_metadata.h"
#include "tokenizer/byte_encoding.h"

namespace minfer {
namespace {

struct Symbol {
    int32_t id;  // symbol id (see BpeTokenizer)
    int32_t prev;
    int32_t next;
    uint32_t begin;  // byte offset in the word
    uint32_t size;   // bytes of the word it covers; 0 once merged into its left neighbour
};

struct Bigram {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
};

// Lowest rank first, then leftmost (llama.cpp's llm_bigram_bpe::comparator).
struct BigramOrder {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
    }
};

}  // namespace

int32_t BpeTokenizer::symbol_of(const Vocabulary& vocab, std::string_view text, bool create) {
    const int32_t token = vocab.find(text);
    if (token != kNoToken) return token;
    const auto text_of = [this](int32_t i) { return std::string_view(extra_texts_[i]); };
    const int32_t extra = extra_index_.find(text, text_of);
    if (extra >= 0) return vocab.size() + extra;
    if (!create) return kNoToken;
    extra_texts_.emplace_back(text);
    const auto i = static_cast<int32_t>(extra_texts_.size() - 1);
    extra_index_.assign(extra_texts_.back(), i, text_of);
    return vocab.size() + i;
}

BpeTokenizer::BpeTokenizer(const Vocabulary& vocab, const GgufMetadata& meta) {
    const GgufArray* merges = meta.get_array_optional("tokenizer.ggml.merges");
    if (merges == nullptr) {
        throw FormatError(concat(meta.source(),
                                 ": metadata key 'tokenizer.ggml.merges' is missing (gpt2 "
                                 "tokenizers need their merges)"));
    }
    if (merges->element_type() != GgufType::String) {
        throw FormatError(concat(meta.source(),
                                 ": metadata key 'tokenizer.ggml.merges' has "
                                 "elements of type ",
                                 gguf_type_name(merges->element_type()), ", expected string"));
    }
    // Symbol ids must stay below 2^31: vocabulary + up to three new texts per merge.
    if (merges->size() > static_cast<uint64_t>((INT32_MAX - vocab.size()) / 3 - 256)) {
        throw FormatError(concat(meta.source(), ": metadata key 'tokenizer.ggml.merges' has ",
                                 merges->size(), " entries, too many"));
    }
    merges_ = MergeTable(merges->size());
    extra_index_ = TextIdTable(1024);
    std::string joined;
    int32_t rank = 0;
    for (std::string_view m : merges->strings()) {
        const int32_t this_rank = rank++;
        const std::size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
        if (space == std::string_view::npos) continue;  // llama.cpp keeps it as ("", ""), unusable
        const std::string_view left = m.substr(0, space), right = m.substr(space + 1);
        joined.assign(left);
        joined += right;
        const int32_t l = symbol_of(vocab, left, true);
        const int32_t r = symbol_of(vocab, right, true);
        const int32_t j = symbol_of(vocab, joined, true);
        merges_.insert_if_absent(l, r, MergeTable::Merge{this_rank, j});
    }
    for (int b = 0; b < 256; ++b) {
        byte_symbols_[b] = symbol_of(vocab, byte_encoding::utf8_of(static_cast<uint8_t>(b)), true);
    }
}

void BpeTokenizer::append_fallback(const Vocabulary& vocab, std::string_view bytes,
                                   std::vector<int32_t>& out) const {
    // llama.cpp looks up each byte of the byte-level text on its own and drops those that are not
    // tokens.
    std::string encoded;
    byte_encoding::append_encoded(encoded, bytes);
    for (char c : encoded) {
        const int32_t id = vocab.find(std::string_view(&c, 1));
        if (id != kNoToken) out.push_back(id);
    }
}

void BpeTokenizer::encode_word(const Vocabulary& vocab, std::string_view word,
                               std::vector<int32_t>& out) const {
    if (word.empty()) return;
    if (vocab.ignore_merges) {
        std::string encoded;
        byte_encoding::append_encoded(encoded, word);
        const int32_t id = vocab.find(encoded);
        if (id != kNoToken) {
            out.push_back(id);
            return;
        }
    }
    std::vector<Symbol> symbols(word.size());
    for (std::size_t i = 0; i < word.size(); ++i) {
        const auto index = static_cast<int32_t>(i);
        symbols[i] = Symbol{byte_symbols_[static_cast<uint8_t>(word[i])], index - 1,
                            i + 1 == word.size() ? -1 : index + 1, static_cast<uint32_t>(i), 1};
    }
    std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
    const auto try_add = [&](int32_t left, int32_t right) {
        if (left < 0 || right < 0) return;
        const int32_t l = symbols[left].id, r = symbols[right].id;
        const MergeTable::Merge m = merges_.find(l, r);
        if (m.rank < 0) return;
        queue.push(Bigram{m.rank, left, right, l, r, m.result});
    };
    for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
        const Bigram bigram = queue.top();
        queue.pop();
        Symbol& left = symbols[bigram.left];
        Symbol& right = symbols[bigram.right];
        // Outdated when either side has changed since the pair was queued.
        if (left.size == 0 || right.size == 0 || left.id != bigram.left_id ||
            right.id != bigram.right_id) {
            continue;
        }
        left.id = bigram.result;
        left.size += right.size;
        right.size = 0;
        left.next = right.next;
        if (right.next >= 0) symbols[right.next].prev = bigram.left;
        try_add(left.prev, bigram.left);
        try_add(bigram.left, left.next);
    }

    for (int32_t i = 0; i != -1; i = symbols[i].next) {
        const Symbol& s = symbols[i];
        if (s.id >= 0 && s.id < vocab.size()) {
            out.push_back(s.id);
        } else {
            append_fallback(vocab, word.substr(s.begin, s.size), out);
        }
    }
}

}  // namespace minfer
