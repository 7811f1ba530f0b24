// Facts about the real fixture files under ../shared/fixtures.

#include <gtest/gtest.h>

#include <map>

#include "common/fixtures.h"
#include "gguf/gguf_file.h"

namespace minfer {
namespace {

std::map<GgmlType, int> count_types(const GgufFile& f) {
    std::map<GgmlType, int> counts;
    for (const TensorInfo* t : f.tensors()) ++counts[t->type];
    return counts;
}

TEST(FixtureFiles, Stories260K) {
    MINFER_REQUIRE_FIXTURE(path, "models/stories260K.gguf");
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.metadata().get_string("general.architecture"), "llama");
    EXPECT_EQ(f.tensors().size(), 48u);
    EXPECT_EQ(count_types(f), (std::map<GgmlType, int>{{GgmlType::F32, 48}}));
    EXPECT_EQ(f.metadata().get<uint32_t>("llama.block_count"), 5u);
    EXPECT_EQ(f.metadata().get_array("tokenizer.ggml.tokens").size(), 512u);
    EXPECT_EQ(f.tensor("token_embd.weight").ne[0], 64);
    EXPECT_EQ(f.tensor("token_embd.weight").ne[1], 512);
}

TEST(FixtureFiles, TinyLlamaQ4_0) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-llama-q4_0.gguf");
    const GgufFile f = GgufFile::open(path);
    const auto counts = count_types(f);
    EXPECT_EQ(counts.at(GgmlType::Q4_0), 29);
    EXPECT_EQ(counts.at(GgmlType::Q6_K), 1);
    EXPECT_EQ(counts.at(GgmlType::F32), 9);
    EXPECT_EQ(counts.size(), 3u);
}

TEST(FixtureFiles, QuantFixtures) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const GgufFile f = GgufFile::open(path);
    EXPECT_EQ(f.tensors().size(), 33u);
    EXPECT_EQ(count_types(f).size(), 17u);  // f32 (src and every deq.T) + 16 quantized types
    EXPECT_EQ(f.tensor("src").type, GgmlType::F32);
    EXPECT_EQ(f.tensor("q.q4_K").type, GgmlType::Q4_K);
    EXPECT_EQ(f.tensor("q.tq1_0").type, GgmlType::TQ1_0);
}

TEST(FixtureFiles, EveryVocabFileHasItsTokens) {
    // Token counts of the real tokenizers (the vocab_size of each model family's config).
    const std::map<std::string, uint64_t> expected = {
        {"llama-spm", 32000},       {"phi-3", 32064},          {"gpt-2", 50257},
        {"gpt2-llama3-pre", 50257}, {"gpt2-qwen2-pre", 50257}, {"falcon", 65024},
        {"starcoder", 49152},       {"refact", 49216},         {"mpt", 50432},
        {"deepseek-coder", 32256},  {"deepseek-llm", 102400},  {"bert-bge", 30522},
        {"gpt-neox", 50432},        {"baichuan", 64000},
    };
    for (const auto& [name, n] : expected) {
        SCOPED_TRACE(name);
        MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-" + name + ".gguf");
        const GgufFile f = GgufFile::open(path);
        EXPECT_EQ(f.metadata().get_array("tokenizer.ggml.tokens").size(), n);
        EXPECT_TRUE(f.tensors().empty());
    }
}

TEST(FixtureFiles, EveryFixtureParses) {
    MINFER_REQUIRE_FIXTURE(dir, "");
    int n = 0;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
        if (entry.path().extension() != ".gguf") continue;
        SCOPED_TRACE(entry.path().string());
        EXPECT_NO_THROW(GgufFile::open(entry.path()));
        ++n;
    }
    EXPECT_GE(n, 20);
}

}  // namespace
}  // namespace minfer
