#pragma once
// minfer::Tokenizer: text <-> token ids for the vocabularies GGUF files carry
// (tokenizer.ggml.model llama = SentencePiece BPE, gpt2 = byte-level BPE with a pre-tokenizer,
// bert = WordPiece), matching llama.cpp token for token.
//
//   GgufFile file = GgufFile::open(path);
//   Tokenizer tok = Tokenizer::from_gguf(file.metadata());  // copies what it needs
//   std::vector<int32_t> ids = tok.tokenize("Hello", /*add_special=*/true, /*parse_special=*/true);
//   std::string text = tok.detokenize(ids, /*show_special=*/false);
//
// A Tokenizer is immutable after loading; its const methods may run on many threads at once.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class GgufMetadata;
struct Vocabulary;

class Tokenizer {
  public:
    // Reads the tokenizer.ggml.* keys. Throws FormatError (missing or inconsistent keys),
    // UnsupportedError (another tokenizer model).
    static Tokenizer from_gguf(const GgufMetadata& metadata);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // add_special: BOS/EOS (CLS/SEP for bert) as the model asks (add_bos_token, add_eos_token).
    // parse_special: text of control tokens (such as "<|im_start|>") becomes those tokens;
    // user-defined tokens are always matched, as in llama.cpp. Any bytes are accepted.
    std::vector<int32_t> tokenize(std::string_view text, bool add_special,
                                  bool parse_special) const;

    // The bytes a token stands for (possibly part of a UTF-8 character); control and unknown
    // tokens give "" unless show_special. Throws UsageError for an id out of range.
    std::string token_to_piece(int32_t id, bool show_special) const;
    // The text of a sequence, as llama.cpp's detokenize: SentencePiece's leading space removed,
    // byte tokens joined into characters, and (for most BPE/WordPiece models) the tokenization
    // spaces before punctuation cleaned up. Throws UsageError naming an id out of range.
    std::string detokenize(std::span<const int32_t> ids, bool show_special) const;

    int32_t n_vocab() const;
    std::optional<int32_t> bos() const;
    std::optional<int32_t> eos() const;
    std::optional<int32_t> eot() const;
    std::optional<int32_t> pad() const;
    std::optional<int32_t> unk() const;
    std::optional<int32_t> sep() const;
    bool is_eog(int32_t id) const;  // end of generation: EOS, EOT, <|im_end|>, ...
    bool is_control(int32_t id) const;
    bool add_bos() const;  // tokenize(add_special) starts with BOS (CLS for bert)
    bool add_eos() const;
    bool add_space_prefix() const;
    bool remove_extra_whitespaces() const;
    // The token's text as stored in the vocabulary ("▁Hello", "Ġworld", "<0x0A>").
    std::string_view token_text(int32_t id) const;
    float token_score(int32_t id) const;

    std::string_view model_name() const;  // "llama", "gpt2", "bert"
    std::string_view pre_name() const;    // the pre-tokenizer used ("" for non-BPE)
    std::size_t merge_count() const;

    // Tests: the pre-tokenizer's words for a text, by the fast path and by PCRE2 alone.
    std::vector<std::string> pre_tokenize(std::string_view text, bool regex_only) const;

    // Throws UsageError("token id X is out of range: the vocabulary has N tokens").
    void check_id(int32_t id) const;

  private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace minfer
