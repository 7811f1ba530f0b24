// Hostile vocabularies and inputs: a clear minfer::Error (naming the key, the id, the counts)
// or a sane result, never a crash, a hang or a huge allocation.

#include <gtest/gtest.h>

#include <random>

#include "common/fixtures.h"
#include "core/error.h"
#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace minfer::test {
namespace {

template <class E>
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    ADD_FAILURE() << "no error thrown";
    return "";
}

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TEST(HostileVocabulary, MissingOrWrongKeys) {
    GgufMetadata empty("x.gguf");
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(empty); }),
                         "tokenizer.ggml.model"));

    GgufMetadata t5 = make_metadata("t5", spm_base_tokens());
    EXPECT_TRUE(contains(error_of<UnsupportedError>([&] { Tokenizer::from_gguf(t5); }), "'t5'"));

    GgufMetadata no_tokens = make_metadata("llama", spm_base_tokens());
    no_tokens.remove("tokenizer.ggml.tokens");
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(no_tokens); }),
                         "tokenizer.ggml.tokens' is missing"));

    GgufMetadata int_tokens = make_metadata("llama", spm_base_tokens());
    int_tokens.set("tokenizer.ggml.tokens",
                   GgufValue::array(GgufArray::of(std::vector<int32_t>{1, 2, 3})));
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(int_tokens); }),
                         "expected string"));

    GgufMetadata no_entries = make_metadata("llama", {});
    EXPECT_TRUE(
        contains(error_of<FormatError>([&] { Tokenizer::from_gguf(no_entries); }), "empty"));
}

TEST(HostileVocabulary, MismatchedArrays) {
    GgufMetadata scores = make_metadata("llama", spm_base_tokens());
    scores.set("tokenizer.ggml.scores", GgufValue::array(GgufArray::of(std::vector<float>(5))));
    const std::string e1 = error_of<FormatError>([&] { Tokenizer::from_gguf(scores); });
    EXPECT_TRUE(contains(e1, "tokenizer.ggml.scores")) << e1;
    EXPECT_TRUE(contains(e1, "has 5 entries, expected 259")) << e1;

    GgufMetadata types = make_metadata("llama", spm_base_tokens());
    types.set("tokenizer.ggml.token_type",
              GgufValue::array(GgufArray::of(std::vector<int32_t>(7))));
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(types); }),
                         "token_type' has 7 entries, expected 259"));

    GgufMetadata float_types = make_metadata("llama", spm_base_tokens());
    float_types.set("tokenizer.ggml.token_type",
                    GgufValue::array(GgufArray::of(std::vector<float>(259))));
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(float_types); }),
                         "expected i32"));

    GgufMetadata bpe = make_metadata("gpt2", {{"a"}, {"b"}, {"ab"}});
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(bpe); }),
                         "tokenizer.ggml.merges' is missing"));
    bpe.set("tokenizer.ggml.merges", GgufValue::array(GgufArray::of(std::vector<uint8_t>{1})));
    EXPECT_TRUE(
        contains(error_of<FormatError>([&] { Tokenizer::from_gguf(bpe); }), "expected string"));

    std::vector<SyntheticToken> tokens = spm_base_tokens();
    tokens.push_back({"<0xZZ>", 6});
    GgufMetadata bad_bytes = make_metadata("llama", tokens);
    EXPECT_TRUE(contains(error_of<FormatError>([&] { Tokenizer::from_gguf(bad_bytes); }),
                         "token 259 has type byte"));

    GgufMetadata bool_id = make_metadata("llama", spm_base_tokens());
    bool_id.set("tokenizer.ggml.bos_token_id", GgufValue::string("one"));
    EXPECT_TRUE(
        contains(error_of<FormatError>([&] { Tokenizer::from_gguf(bool_id); }), "bos_token_id"));
}

TEST(HostileVocabulary, SpecialIdsOutOfRangeFallBack) {
    GgufMetadata meta = make_metadata("llama", spm_base_tokens());
    meta.set("tokenizer.ggml.bos_token_id", GgufValue::of<uint32_t>(100000));
    meta.set("tokenizer.ggml.eos_token_id", GgufValue::of<int32_t>(-7));
    meta.set("tokenizer.ggml.padding_token_id", GgufValue::of<uint64_t>(~0ull));
    const Tokenizer tok = Tokenizer::from_gguf(meta);
    EXPECT_EQ(tok.bos(), 1);  // SentencePiece's defaults
    EXPECT_EQ(tok.eos(), 2);
    EXPECT_FALSE(tok.pad().has_value());

    // bert's default ids (CLS 101, SEP 102) do not exist in a 3-token vocabulary: no such tokens
    const Tokenizer bert = Tokenizer::from_gguf(make_metadata("bert", {{"[PAD]", 3},
                                                                       {"\xE2\x96\x81"
                                                                        "a"},
                                                                       {"b"}}));
    EXPECT_FALSE(bert.bos().has_value());
    EXPECT_FALSE(bert.sep().has_value());
    EXPECT_FALSE(bert.unk().has_value());
    EXPECT_EQ(bert.tokenize("a b", true, true), std::vector<int32_t>{1});  // "b" has no UNK to be
}

TEST(HostileVocabulary, EmptyAndDuplicateTokens) {
    std::vector<SyntheticToken> tokens = spm_base_tokens();
    tokens.push_back({""});
    tokens.push_back(
        {"\xE2\x96\x81"
         "a",
         1, -1});
    tokens.push_back(
        {"\xE2\x96\x81"
         "a",
         1, -1});  // the later id wins, as in llama.cpp
    const Tokenizer tok = Tokenizer::from_gguf(make_metadata("llama", tokens));
    EXPECT_EQ(tok.token_text(259), "[EMPTY_259]");
    EXPECT_EQ(tok.tokenize("a", false, false), std::vector<int32_t>{261});
    for (int32_t id : tok.tokenize("[EMPTY_259]", false, true)) EXPECT_NE(id, 259);
}

TEST(HostileVocabulary, NoByteTokens) {
    const std::vector<SyntheticToken> tokens = {{"<unk>", 2},
                                                {"<s>", 3},
                                                {"</s>", 3},
                                                {"\xE2\x96\x81"
                                                 "a",
                                                 1, -1}};
    const Tokenizer with_unk = Tokenizer::from_gguf(make_metadata("llama", tokens));
    EXPECT_EQ(with_unk.tokenize("aq", false, false), (std::vector<int32_t>{3, 0}));
    // SentencePiece's default UNK is id 0, whatever it is
    const Tokenizer no_unk = Tokenizer::from_gguf(make_metadata("llama", {{"x"},
                                                                          {"\xE2\x96\x81"
                                                                           "a",
                                                                           1, -1}}));
    EXPECT_EQ(no_unk.unk(), 0);
    EXPECT_EQ(no_unk.tokenize("aq", false, false), (std::vector<int32_t>{1, 0}));
}

TEST(HostileVocabulary, UnknownPreTokenizerFallsBackToDefault) {
    GgufMetadata meta = make_metadata("gpt2", {{"a"}, {"b"}, {"ab"}, {"\xC4\xA0"}});
    meta.set("tokenizer.ggml.merges",
             GgufValue::array(GgufArray::of_strings({"a b", "nospace", " "})));
    meta.set("tokenizer.ggml.pre", GgufValue::string("no-such-pre"));
    const Tokenizer tok = Tokenizer::from_gguf(meta);
    EXPECT_EQ(tok.pre_name(), "default");
    EXPECT_EQ(tok.tokenize("ab ab", false, false), (std::vector<int32_t>{2, 3, 2}));
    EXPECT_EQ(tok.tokenize("abc", false, false),
              std::vector<int32_t>{2});  // c has no token: dropped
}

TEST(HostileIds, OutOfRangeIdsNameIdAndVocabularySize) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-qwen2-f16.gguf");
    const Tokenizer tok = load_tokenizer(path);
    for (int32_t bad : {-1, 8195, INT32_MAX, INT32_MIN}) {
        const std::string e = error_of<UsageError>([&] { tok.token_to_piece(bad, true); });
        EXPECT_TRUE(contains(e, std::to_string(bad))) << e;
        EXPECT_TRUE(contains(e, "8195")) << e;
        EXPECT_THROW(tok.token_text(bad), UsageError);
    }
    const std::vector<int32_t> ids = {1, 2, 9000};
    EXPECT_TRUE(contains(error_of<UsageError>([&] { tok.detokenize(ids, false); }), "9000"));
}

// Every family takes any bytes; byte-level BPE first turns invalid UTF-8 into U+FFFD, as
// llama.cpp does.
TEST(HostileText, InvalidUtf8AndRandomBytes) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> byte(0, 255);
    for (const std::string& family : vocab_families()) {
        MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-" + family + ".gguf");
        const Tokenizer tok = load_tokenizer(path);
        for (int i = 0; i < 50; ++i) {
            std::string text(static_cast<std::size_t>(i * 7), '\0');
            for (char& c : text) c = static_cast<char>(byte(rng));
            const std::vector<int32_t> ids = tok.tokenize(text, true, true);
            for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << family;
            tok.detokenize(ids, true);
            if (tok.model_name() == "gpt2") {
                EXPECT_EQ(ids, tok.tokenize(unicode::canonicalize(text), true, true)) << family;
            }
        }
    }
}

// SentencePiece with byte fallback loses nothing of valid UTF-8 (invalid bytes can swallow the
// U+2581 that stands for a following space, in llama.cpp as here).
TEST(HostileText, SentencePieceRoundTripsAnyValidUtf8) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-llama-spm.gguf");
    const Tokenizer tok = load_tokenizer(path);
    std::mt19937 rng(11);
    std::uniform_int_distribution<uint32_t> cp(1, unicode::kMaxCodepoint);
    std::uniform_int_distribution<uint32_t> ascii(1, 127);
    for (int i = 0; i < 300; ++i) {
        std::string text;
        for (int k = 0; k < i % 50; ++k) {
            uint32_t c = k % 3 ? ascii(rng) : cp(rng);
            if (c >= 0xD800 && c <= 0xDFFF) c = ' ';
            unicode::append_utf8(text, c);
        }
        EXPECT_EQ(tok.detokenize(tok.tokenize(text, false, false), false), text);
    }
}

// Long inputs with no word boundaries, long runs of spaces and of digits stay fast.
TEST(HostileText, LongDegenerateInputs) {
    for (const std::string family :
         {"gpt-2", "llama-spm", "gpt2-llama3-pre", "bert-bge", "falcon"}) {
        MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-" + family + ".gguf");
        const Tokenizer tok = load_tokenizer(path);
        for (const std::string& text :
             {std::string(200000, 'a'), std::string(200000, ' '), std::string(200000, '7'),
              std::string(100000, '\n') + "x", std::string(50000, '\xE4') + "\xB8\xAD"}) {
            const std::vector<int32_t> ids = tok.tokenize(text, false, false);
            const bool only_spaces = text.front() == ' ';  // WordPiece drops whitespace
            EXPECT_EQ(ids.empty(), only_spaces && tok.model_name() == "bert") << family;
            if (tok.model_name() == "llama") {
                EXPECT_EQ(tok.detokenize(ids, false), text);
            }
        }
    }
}

}  // namespace
}  // namespace minfer::test
