#pragma once
// Pre-tokenizers of byte-level BPE vocabularies: the regular expressions that split text into
// words before BPE merges run inside each word, chosen by `tokenizer.ggml.pre`. Each stage splits
// every piece left by the previous stage into its matches and the gaps between them (all of which
// become words), as llama.cpp does. Stages run through PCRE2 (JIT); the GPT-2 and Llama-3/Qwen2
// patterns also have hand-written splitters that produce identical words much faster.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class CompiledRegex;

// A pre-tokenizer family: its patterns and the vocabulary flags llama.cpp ties to it.
struct PreTokenizerSpec {
    std::vector<std::string_view> names;  // values of tokenizer.ggml.pre that select it
    std::vector<std::string_view> patterns;
    bool clean_spaces = true;  // detokenize removes " ," " ." " 's" ... (HF clean_up_tokenization)
    bool ignore_merges = false;  // a word that is itself a token skips the merges
    bool add_bos = false;        // default of add_bos_token
    bool no_bos = false;         // the family has no BOS token
};

// The spec for a `tokenizer.ggml.pre` value, or nullptr if unknown.
const PreTokenizerSpec* find_pre_tokenizer(std::string_view name);
// The spec llama.cpp uses when the key is missing ("default").
const PreTokenizerSpec& default_pre_tokenizer();
// Every known spec (tests).
const std::vector<PreTokenizerSpec>& all_pre_tokenizers();

class PreTokenizer {
  public:
    explicit PreTokenizer(const PreTokenizerSpec& spec);
    ~PreTokenizer();
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;

    // Splits text (canonical UTF-8: see unicode::canonicalize) into words; appends each word's
    // end offset (bytes) to `word_ends`. Text longer than 4 GiB is refused (UsageError).
    void split(std::string_view text, std::vector<uint32_t>& word_ends) const;
    // The same, running every stage through PCRE2 (tests compare it with split()).
    void split_with_regex(std::string_view text, std::vector<uint32_t>& word_ends) const;

  private:
    struct Stage;
    void run(std::string_view text, std::vector<uint32_t>& word_ends, bool regex_only) const;

    std::vector<Stage> stages_;
};

}  // namespace minfer
