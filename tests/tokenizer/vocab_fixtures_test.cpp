// Every test string of llama.cpp's tokenizer test vectors gives exactly llama.cpp's ids (no BOS,
// special-token text not parsed), for every vocabulary family in ../shared/fixtures/vocab.

#include <gtest/gtest.h>

#include <sstream>

#include "common/fixtures.h"
#include "tokenizer_test_util.h"

namespace minfer::test {
namespace {

std::string ids_to_string(const std::vector<int32_t>& ids) {
    std::ostringstream s;
    for (std::size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
    return s.str();
}

class VocabFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabFixture, EveryStringGivesLlamaCppIds) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-" + GetParam() + ".gguf");
    const Tokenizer tok = load_tokenizer(path);
    const std::vector<VocabCase> cases = read_vocab_cases(path);
    ASSERT_GT(cases.size(), 30u);
    int passed = 0;
    for (const VocabCase& c : cases) {
        const std::vector<int32_t> ids = tok.tokenize(c.text, false, false);
        if (ids == c.ids) {
            ++passed;
        } else {
            ADD_FAILURE() << GetParam() << ": text \"" << c.text << "\"\n  expected "
                          << ids_to_string(c.ids) << "\n  got      " << ids_to_string(ids);
        }
    }
    RecordProperty("passed", passed);
    std::printf("[ family   ] %-16s %d/%zu strings exact\n", GetParam().c_str(), passed,
                cases.size());
}

// Detokenizing the ids gives the text back wherever the tokenizer loses nothing: byte-level BPE
// without space clean-up, SentencePiece (whose prefix space detokenize removes).
TEST_P(VocabFixture, RoundTripWhereLossless) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-" + GetParam() + ".gguf");
    const Tokenizer tok = load_tokenizer(path);
    if (tok.model_name() == "bert") GTEST_SKIP() << "WordPiece lowercases and drops spaces";
    int checked = 0;
    for (const VocabCase& c : read_vocab_cases(path)) {
        const std::vector<int32_t> ids = tok.tokenize(c.text, false, false);
        std::string back = tok.detokenize(ids, false);
        if (tok.model_name() == "gpt2") {
            // clean_spaces (most BPE families) removes " ," " ." " 's": lossy by design
            if (back != c.text && tok.pre_name() != "qwen2" && tok.pre_name() != "deepseek-llm" &&
                tok.pre_name() != "deepseek-coder") {
                continue;
            }
        }
        EXPECT_EQ(back, c.text) << GetParam();
        ++checked;
    }
    EXPECT_GT(checked, 10);
}

INSTANTIATE_TEST_SUITE_P(Families, VocabFixture, ::testing::ValuesIn(vocab_families()),
                         [](const auto& param_info) {
                             std::string name = param_info.param;
                             for (char& c : name) {
                                 if (c == '-') c = '_';
                             }
                             return name;
                         });

}  // namespace
}  // namespace minfer::test
