#pragma once
// A tokenizer vocabulary read from the GGUF `tokenizer.ggml.*` keys: token texts, scores and
// attributes, the special token ids and the flags that steer tokenizing, with llama.cpp's
// defaults and fix-ups (llama-vocab.cpp) where the file leaves them open.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/hash_tables.h"
#include "tokenizer/pre_tokenizer.h"

namespace minfer {

class GgufMetadata;

enum class VocabKind { Spm, Bpe, Wpm };  // tokenizer.ggml.model: llama, gpt2, bert

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// Token attributes (llama.cpp's llama_token_attr bits).
namespace attr {
inline constexpr uint16_t kUndefined = 0;
inline constexpr uint16_t kUnknown = 1 << 0;
inline constexpr uint16_t kUnused = 1 << 1;
inline constexpr uint16_t kNormal = 1 << 2;
inline constexpr uint16_t kControl = 1 << 3;
inline constexpr uint16_t kUserDefined = 1 << 4;
inline constexpr uint16_t kByte = 1 << 5;
inline constexpr uint16_t kLstrip = 1 << 7;  // parse_special eats spaces before the token
inline constexpr uint16_t kRstrip = 1 << 8;  // ... and after it
}  // namespace attr

inline constexpr int32_t kNoToken = -1;

struct SpecialIds {
    int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, unk = kNoToken,
            sep = kNoToken, pad = kNoToken, mask = kNoToken;
    int32_t fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken, fim_pad = kNoToken,
            fim_rep = kNoToken, fim_sep = kNoToken;
};

struct Vocabulary {
    // Throws FormatError / UnsupportedError naming the key when the metadata is unusable.
    static Vocabulary load(const GgufMetadata& meta);

    int32_t size() const { return static_cast<int32_t>(texts.size()); }
    bool contains(int32_t id) const { return id >= 0 && id < size(); }
    // The id whose text is `text` (the last one if several share it), or kNoToken.
    int32_t find(std::string_view text) const {
        return index.find(text, [this](int32_t id) { return texts[id]; });
    }
    bool is_eog(int32_t id) const { return contains(id) && eog[id] != 0; }

    VocabKind kind = VocabKind::Spm;
    std::string model_name;  // tokenizer.ggml.model
    std::string pre_name;    // tokenizer.ggml.pre as resolved ("default" when missing/unknown)
    const PreTokenizerSpec* pre = nullptr;  // BPE only

    std::vector<char> arena;              // token texts, back to back
    std::vector<std::string_view> texts;  // views into arena
    std::vector<float> scores;
    std::vector<uint16_t> attrs;
    std::vector<uint8_t> eog;  // 1 for end-of-generation ids
    TextIdTable index;
    std::size_t max_token_length = 0;  // bytes

    SpecialIds special;
    bool add_bos = false;
    bool add_eos = false;
    bool add_space_prefix = false;
    bool remove_extra_whitespaces = false;  // read and reported; llama.cpp uses it for T5 only
    bool clean_spaces = false;
    bool ignore_merges = false;

    // Control, user-defined and unknown tokens, longest text first: what parse_special matches.
    std::vector<int32_t> special_tokens;
};

// The byte an SPM/WPM byte token (<0xNN>) stands for.
uint8_t byte_token_value(std::string_view text);

}  // namespace minfer
