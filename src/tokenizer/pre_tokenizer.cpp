#include "tokenizer/pre_tokenizer.h"

#include <stdexcept>

#include "core/error.h"
#include "tokenizer/compiled_regex.h"
#include "tokenizer/fast_splitters.h"

namespace minfer {
namespace {

// The split patterns, as the models' tokenizer.json files (and llama.cpp) define them; (?i:...)
// is spelled out as [sS] etc. exactly as llama.cpp does.
constexpr std::string_view kGpt2 =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";
constexpr std::string_view kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr std::string_view kTekken =
    R"re([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
// Cased letters (DeepSeek's tokenizer.json lists them as ranges).
constexpr std::string_view kDeepseekLetters =
    R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)re";
// DeepSeek's [!-/:-~！-／：-～‘-‟　-。]: llama.cpp turns the ideographic space U+3000 into \v
// before matching, so it never matches this range; the range here starts at U+3001 instead.
constexpr std::string_view kDeepseekPunct =
    R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3001}-\x{3002}]+)re";
// DeepSeek's [一-龥ࠀ-一가-퟿] (U+0800..U+4E00 is in the original); the whitespace code
// points inside it are cut out for the same reason as above.
constexpr std::string_view kDeepseekCjk =
    R"re([\x{4E00}-\x{9FA5}\x{800}-\x{167F}\x{1681}-\x{1FFF}\x{200B}-\x{2027}\x{202A}-\x{202E}\x{2030}-\x{205E}\x{2060}-\x{2FFF}\x{3001}-\x{4E00}\x{AC00}-\x{D7FF}]+)re";
constexpr std::string_view kPoro =
    R"re( ?[^(\s|.,!?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{964}\x{6D4}\x{60C})]+)re";

std::vector<PreTokenizerSpec> make_specs() {
    std::vector<PreTokenizerSpec> s;
    const auto add = [&](std::vector<std::string_view> names,
                         std::vector<std::string_view> patterns) -> PreTokenizerSpec& {
        s.push_back(PreTokenizerSpec{std::move(names), std::move(patterns)});
        return s.back();
    };
    add({"default"}, {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", "[0-9][0-9][0-9]"});
    {
        auto& llama3 = add({"llama3", "llama-v3", "llama-bpe", "falcon3"}, {kLlama3});
        llama3.ignore_merges = true;
        llama3.add_bos = true;
    }
    add({"dbrx", "smaug-bpe"}, {kLlama3});
    add({"deepseek-llm"},
        {"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"re(\s+$)re", kDeepseekCjk, R"re(\p{N}+)re"})
        .clean_spaces = false;
    add({"deepseek-coder"},
        {"[\r\n]", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re", kDeepseekCjk, R"re(\p{N})re"})
        .clean_spaces = false;
    add({"falcon"}, {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, "[0-9][0-9][0-9]"});
    add({"starcoder", "refact", "codeshell", "exaone", "minerva-7b"}, {R"re(\p{N})re", kGpt2});
    add({"command-r", "smollm"}, {R"re(\p{N})re", kGpt2}).clean_spaces = false;
    // gpt-neox is not a llama.cpp name; GPT-NeoX's byte-level pre-tokenizer is GPT-2's.
    add({"gpt-2", "gpt-neox", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "gigachat",
         "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe"},
        {kGpt2});
    add({"qwen2"}, {kQwen2}).clean_spaces = false;
    add({"stablelm2", "megrez"}, {kQwen2});
    add({"poro-chat"}, {kPoro}).clean_spaces = false;
    add({"bloom", "gpt3-finnish"}, {kPoro});
    add({"chatglm-bpe"}, {kLlama3}).no_bos = true;
    add({"viking"}, {kPoro, R"re(\p{N})re"}).clean_spaces = false;
    {
        auto& tekken = add({"tekken"}, {kTekken});
        tekken.clean_spaces = false;
        tekken.ignore_merges = true;
        tekken.add_bos = true;
    }
    {
        auto& chameleon =
            add({"chameleon"},
                {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                 R"re(([\t\n]|    |  ))re", R"re(\p{N})re", R"re([\p{P}!-/:-@\[-`{-~])re", kGpt2});
        chameleon.add_bos = true;
        chameleon.clean_spaces = false;
    }
    return s;
}

// Whitespace code points past ASCII: llama.cpp matches them as \s (it replaces each by \v
// before running std::regex); PCRE2 without UCP would not.
constexpr std::string_view kWideSpaces =
    R"re(\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})re";

// Rewrites \s and \S so that they cover kWideSpaces.
std::string widen_whitespace(std::string_view pattern) {
    std::string out;
    bool in_class = false;
    for (std::size_t i = 0; i < pattern.size(); ++i) {
        const char c = pattern[i];
        if (c == '\\' && i + 1 < pattern.size()) {
            const char e = pattern[++i];
            if (e == 's') {
                out += in_class ? concat("\\s", kWideSpaces) : concat("[\\s", kWideSpaces, "]");
            } else if (e == 'S' && !in_class) {
                out += concat("[^\\s", kWideSpaces, "]");
            } else if (e == 'S') {
                throw std::logic_error("\\S inside a character class is not supported");
            } else {
                out += c;
                out += e;
            }
            continue;
        }
        if (c == '[' && !in_class)
            in_class = true;
        else if (c == ']' && in_class)
            in_class = false;
        out += c;
    }
    return out;
}

enum class FastKind { None, Gpt2, Llama3, Qwen2 };

FastKind fast_kind_of(std::string_view pattern) {
    if (pattern == kGpt2) return FastKind::Gpt2;
    if (pattern == kLlama3) return FastKind::Llama3;
    if (pattern == kQwen2) return FastKind::Qwen2;
    return FastKind::None;
}

bool has_surrogate(std::string_view text) {
    for (std::size_t i = 0; i + 1 < text.size(); ++i) {
        if (static_cast<unsigned char>(text[i]) == 0xED &&
            static_cast<unsigned char>(text[i + 1]) >= 0xA0) {
            return true;
        }
    }
    return false;
}

// Canonical text may hold encoded surrogates (llama.cpp accepts them); PCRE2 needs valid UTF-8,
// so each becomes U+E000, also three bytes and also neither letter, number nor space.
std::string replace_surrogates(std::string_view text) {
    std::string out(text);
    for (std::size_t i = 0; i + 2 < out.size(); ++i) {
        if (static_cast<unsigned char>(out[i]) == 0xED &&
            static_cast<unsigned char>(out[i + 1]) >= 0xA0) {
            out[i] = static_cast<char>(0xEE);
            out[i + 1] = static_cast<char>(0x80);
            out[i + 2] = static_cast<char>(0x80);
            i += 2;
        }
    }
    return out;
}

}  // namespace

struct PreTokenizer::Stage {
    std::shared_ptr<const CompiledRegex> regex;
    FastKind fast = FastKind::None;
};

const std::vector<PreTokenizerSpec>& all_pre_tokenizers() {
    static const std::vector<PreTokenizerSpec> specs = make_specs();
    return specs;
}

const PreTokenizerSpec* find_pre_tokenizer(std::string_view name) {
    for (const PreTokenizerSpec& spec : all_pre_tokenizers()) {
        for (std::string_view n : spec.names) {
            if (n == name) return &spec;
        }
    }
    return nullptr;
}

const PreTokenizerSpec& default_pre_tokenizer() {
    return all_pre_tokenizers().front();
}

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec) {
    for (std::string_view pattern : spec.patterns) {
        stages_.push_back(Stage{std::make_shared<const CompiledRegex>(widen_whitespace(pattern)),
                                fast_kind_of(pattern)});
    }
}

PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

void PreTokenizer::split(std::string_view text, std::vector<uint32_t>& word_ends) const {
    run(text, word_ends, false);
}

void PreTokenizer::split_with_regex(std::string_view text, std::vector<uint32_t>& word_ends) const {
    run(text, word_ends, true);
}

void PreTokenizer::run(std::string_view text, std::vector<uint32_t>& word_ends,
                       bool regex_only) const {
    if (text.size() >= UINT32_MAX) {
        throw LimitError(concat("text of ", text.size(), " bytes is too long to tokenize"));
    }
    if (text.empty()) return;
    std::string match_storage;
    std::string_view match = text;
    if (has_surrogate(text)) {
        match_storage = replace_surrogates(text);
        match = match_storage;
    }
    std::vector<uint32_t> pieces{static_cast<uint32_t>(text.size())};
    std::vector<uint32_t> next;
    for (const Stage& stage : stages_) {
        next.clear();
        next.reserve(pieces.size() * 2);
        uint32_t begin = 0;
        for (uint32_t end : pieces) {
            switch (regex_only ? FastKind::None : stage.fast) {
                case FastKind::Gpt2:
                    split_gpt2(text, begin, end, next);
                    break;
                case FastKind::Llama3:
                    split_llama3(text, begin, end, 3, next);
                    break;
                case FastKind::Qwen2:
                    split_llama3(text, begin, end, 1, next);
                    break;
                case FastKind::None:
                    stage.regex->split(match, begin, end, next);
                    break;
            }
            begin = end;
        }
        pieces.swap(next);
    }
    word_ends.insert(word_ends.end(), pieces.begin(), pieces.end());
}

}  // namespace minfer
