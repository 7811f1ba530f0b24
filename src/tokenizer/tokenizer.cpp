#include "tokenizer/tokenizer.h"

#include <deque>

#include "core/error.h"
#include "tokenizer/special_split.h"
#include "tokenizer/token_cache.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"
#include "tokenizer/wpm_tokenizer.h"

namespace minfer {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";

std::optional<int32_t> optional_id(int32_t id) {
    return id == kNoToken ? std::nullopt : std::optional<int32_t>(id);
}

// SentencePiece shows spaces as U+2581.
std::string escape_spaces(std::string_view text, bool space_prefix) {
    std::string out;
    out.reserve(text.size() + text.size() / 4 + 3);
    if (space_prefix) out += kSpmSpace;
    for (char c : text) {
        if (c == ' ') {
            out += kSpmSpace;
        } else {
            out += c;
        }
    }
    return out;
}

// `text` must outlive `cache`.
void tokenize_bpe(const Vocabulary& vocab, const BpeTokenizer& bpe, const PreTokenizer& pre,
                  std::string_view text, std::vector<int32_t>& out, TokenCache& cache) {
    std::vector<uint32_t> ends;
    pre.split(text, ends);
    uint32_t begin = 0;
    std::vector<int32_t> word_ids;
    for (uint32_t end : ends) {
        const std::string_view word = text.substr(begin, end - begin);
        begin = end;
        if (cache.find(word, out)) continue;
        word_ids.clear();
        bpe.encode_word(vocab, word, word_ids);
        out.insert(out.end(), word_ids.begin(), word_ids.end());
        cache.put(word, word_ids);
    }
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::from_gguf(const GgufMetadata& metadata) {
    auto impl = std::make_unique<Impl>();
    impl->vocab = Vocabulary::load(metadata);
    switch (impl->vocab.kind) {
        case VocabKind::Spm:
            impl->spm = SpmTokenizer(impl->vocab);
            break;
        case VocabKind::Bpe:
            impl->bpe = BpeTokenizer(impl->vocab, metadata);
            impl->pre.emplace(*impl->vocab.pre);
            break;
        case VocabKind::Wpm:
            break;
    }
    return Tokenizer(std::move(impl));
}

std::vector<int32_t> Tokenizer::tokenize(std::string_view text, bool add_special,
                                         bool parse_special) const {
    if (text.size() >= UINT32_MAX / 2) {
        throw LimitError(concat("text of ", text.size(), " bytes is too long to tokenize"));
    }
    const Vocabulary& v = impl_->vocab;
    const std::vector<Fragment> fragments = split_special(v, text, parse_special);
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 4);
    TokenCache cache;
    const auto raw = [&](const Fragment& f) { return text.substr(f.begin, f.end - f.begin); };

    switch (v.kind) {
        case VocabKind::Spm: {
            if (add_special && v.add_bos && v.special.bos != kNoToken) out.push_back(v.special.bos);
            bool prev_special = true;         // the first text fragment gets the space prefix
            std::deque<std::string> escaped;  // kept in place: the cache holds views into them
            for (const Fragment& f : fragments) {
                if (!f.is_text()) {
                    out.push_back(f.token);
                    prev_special = true;
                    continue;
                }
                escaped.push_back(escape_spaces(raw(f), v.add_space_prefix && prev_special));
                impl_->spm.encode(v, escaped.back(), out, cache);
                prev_special = false;
            }
            if (add_special && v.add_eos && v.special.eos != kNoToken) out.push_back(v.special.eos);
            break;
        }
        case VocabKind::Bpe: {
            if (add_special && v.add_bos && v.special.bos != kNoToken) out.push_back(v.special.bos);
            std::deque<std::string> canonical;  // kept in place: the cache holds views into them
            for (const Fragment& f : fragments) {
                if (f.is_text()) {
                    std::string_view part = raw(f);
                    if (!unicode::is_canonical(part)) {  // invalid bytes become U+FFFD (llama.cpp)
                        canonical.push_back(unicode::canonicalize(part));
                        part = canonical.back();
                    }
                    tokenize_bpe(v, impl_->bpe, *impl_->pre, part, out, cache);
                } else {
                    out.push_back(f.token);
                }
            }
            if (add_special && v.add_eos && v.special.eos != kNoToken) out.push_back(v.special.eos);
            break;
        }
        case VocabKind::Wpm: {
            // llama.cpp always frames bert input as [CLS] ... [SEP]
            if (add_special && v.special.bos != kNoToken) out.push_back(v.special.bos);
            for (const Fragment& f : fragments) {
                if (f.is_text()) {
                    wpm_encode(v, raw(f), out);
                } else {
                    out.push_back(f.token);
                }
            }
            if (add_special && v.special.sep != kNoToken) out.push_back(v.special.sep);
            break;
        }
    }
    return out;
}

void Tokenizer::check_id(int32_t id) const {
    if (!impl_->vocab.contains(id)) {
        throw UsageError(concat("token id ", id, " is out of range: the vocabulary has ",
                                impl_->vocab.size(), " tokens"));
    }
}

std::string Tokenizer::token_to_piece(int32_t id, bool show_special) const {
    check_id(id);
    return token_piece(impl_->vocab, id, show_special);
}

std::string Tokenizer::detokenize(std::span<const int32_t> ids, bool show_special) const {
    for (int32_t id : ids) check_id(id);
    const Vocabulary& v = impl_->vocab;
    std::string text;
    bool strip_space = v.add_space_prefix;  // SentencePiece's prefix space of the first piece
    for (int32_t id : ids) {
        const std::string piece = token_piece(v, id, show_special);
        const bool skip = strip_space && !piece.empty() && piece.front() == ' ';
        text.append(piece, skip ? 1 : 0);
        strip_space = false;
    }
    if (v.clean_spaces) clean_up_spaces(text);
    return text;
}

int32_t Tokenizer::n_vocab() const {
    return impl_->vocab.size();
}
std::optional<int32_t> Tokenizer::bos() const {
    return optional_id(impl_->vocab.special.bos);
}
std::optional<int32_t> Tokenizer::eos() const {
    return optional_id(impl_->vocab.special.eos);
}
std::optional<int32_t> Tokenizer::eot() const {
    return optional_id(impl_->vocab.special.eot);
}
std::optional<int32_t> Tokenizer::pad() const {
    return optional_id(impl_->vocab.special.pad);
}
std::optional<int32_t> Tokenizer::unk() const {
    return optional_id(impl_->vocab.special.unk);
}
std::optional<int32_t> Tokenizer::sep() const {
    return optional_id(impl_->vocab.special.sep);
}
bool Tokenizer::is_eog(int32_t id) const {
    return impl_->vocab.is_eog(id);
}
bool Tokenizer::is_control(int32_t id) const {
    return impl_->vocab.contains(id) && (impl_->vocab.attrs[id] & attr::kControl);
}
bool Tokenizer::add_bos() const {
    const Vocabulary& v = impl_->vocab;
    return v.special.bos != kNoToken && (v.add_bos || v.kind == VocabKind::Wpm);
}
bool Tokenizer::add_eos() const {
    const Vocabulary& v = impl_->vocab;
    return v.kind == VocabKind::Wpm ? v.special.sep != kNoToken
                                    : v.add_eos && v.special.eos != kNoToken;
}
bool Tokenizer::add_space_prefix() const {
    return impl_->vocab.add_space_prefix;
}
bool Tokenizer::remove_extra_whitespaces() const {
    return impl_->vocab.remove_extra_whitespaces;
}

std::string_view Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return impl_->vocab.texts[id];
}
float Tokenizer::token_score(int32_t id) const {
    check_id(id);
    return impl_->vocab.scores[id];
}

std::string_view Tokenizer::model_name() const {
    return impl_->vocab.model_name;
}
std::string_view Tokenizer::pre_name() const {
    return impl_->vocab.pre_name;
}
std::size_t Tokenizer::merge_count() const {
    return impl_->bpe.merge_count();
}

std::vector<std::string> Tokenizer::pre_tokenize(std::string_view text, bool regex_only) const {
    std::vector<std::string> words;
    if (!impl_->pre) return words;
    const std::string canonical = unicode::canonicalize(text);
    std::vector<uint32_t> ends;
    if (regex_only) {
        impl_->pre->split_with_regex(canonical, ends);
    } else {
        impl_->pre->split(canonical, ends);
    }
    uint32_t begin = 0;
    for (uint32_t end : ends) {
        words.push_back(canonical.substr(begin, end - begin));
        begin = end;
    }
    return words;
}

}  // namespace minfer
