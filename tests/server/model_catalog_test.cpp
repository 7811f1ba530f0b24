// The catalogue of served models: ids from references, suffixes for collisions, the names a
// client may use (ollama's and Hugging Face's spellings), and which names may be pulled.

#include "server/model_catalog.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace minfer::server {
namespace {

CatalogEntry entry(std::string reference, std::string id = "") {
    CatalogEntry e;
    e.reference = std::move(reference);
    e.id = std::move(id);
    return e;
}

TEST(ModelCatalog, IdsFollowTheReference) {
    EXPECT_EQ(model_id_for("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"),
              "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
    EXPECT_EQ(model_id_for("hf:o/r"), "o/r");
    EXPECT_EQ(model_id_for("hf:o/r/sub/model-q8_0.gguf"), "o/r/sub/model-q8_0.gguf");
    EXPECT_EQ(model_id_for("ollama:qwen2.5:0.5b"), "qwen2.5:0.5b");
    EXPECT_EQ(model_id_for("ollama:phi3"), "phi3:latest");
    EXPECT_EQ(model_id_for("ollama:someone/model:7b"), "someone/model:7b");
    EXPECT_EQ(model_id_for("https://example.com/files/tiny.gguf"), "tiny");
    EXPECT_EQ(model_id_for("/models/tiny-llama-q4_0.gguf"), "tiny-llama-q4_0");
    EXPECT_EQ(model_id_for("models/dir/"), "dir");
    EXPECT_THROW(model_id_for("hf:no-repo"), UsageError);
}

TEST(ModelCatalog, CollidingIdsGetASuffixAndANote) {
    ModelCatalog c;
    EXPECT_EQ(c.add(entry("/a/model.gguf")), "model");
    std::string note;
    EXPECT_EQ(c.add(entry("/b/model.gguf"), &note), "model-2");
    EXPECT_NE(note.find("/b/model.gguf"), std::string::npos) << note;
    EXPECT_NE(note.find("'model-2'"), std::string::npos) << note;
    EXPECT_EQ(c.add(entry("/c/model.gguf")), "model-3");
    // The same reference twice is one model.
    EXPECT_EQ(c.add(entry("/a/model.gguf")), "model");
    EXPECT_EQ(c.entries().size(), 3u);
    // --alias names the first.
    ModelCatalog aliased;
    EXPECT_EQ(aliased.add(entry("/a/model.gguf", "my-model")), "my-model");
}

TEST(ModelCatalog, FindsAModelByItsIdOrTheReferenceAsEitherToolWritesIt) {
    ModelCatalog c;
    c.add(entry("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"));
    c.add(entry("ollama:qwen2.5:0.5b"));
    c.add(entry("ollama:phi3"));
    c.add(entry("/models/tiny-llama-q4_0.gguf"));
    const auto id_of = [&](std::string_view name) {
        const CatalogEntry* e = c.find(name);
        return e != nullptr ? e->id : std::string("(none)");
    };
    for (const char* name : {"Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
                             "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
                             "hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M",
                             "qwen/qwen2.5-0.5b-instruct-gguf:q4_k_m"})
        EXPECT_EQ(id_of(name), "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M") << name;
    for (const char* name : {"qwen2.5:0.5b", "ollama:qwen2.5:0.5b", "library/qwen2.5:0.5b"})
        EXPECT_EQ(id_of(name), "qwen2.5:0.5b") << name;
    for (const char* name : {"phi3", "phi3:latest", "PHI3"}) EXPECT_EQ(id_of(name), "phi3:latest");
    EXPECT_EQ(id_of("tiny-llama-q4_0"), "tiny-llama-q4_0");
    EXPECT_EQ(id_of("tiny-llama-q4_0:latest"), "tiny-llama-q4_0");
    // A path is never a name: the file's full path does not find it.
    EXPECT_EQ(id_of("/models/tiny-llama-q4_0.gguf"), "(none)");
    EXPECT_EQ(id_of("qwen2.5:7b"), "(none)");
    EXPECT_EQ(id_of(""), "(none)");
}

TEST(ModelCatalog, RemovesByIdAndFreesTheId) {
    ModelCatalog c;
    c.add(entry("/a/model.gguf"));
    c.add(entry("/b/other.gguf"));
    EXPECT_TRUE(c.remove("model"));
    EXPECT_FALSE(c.remove("model"));
    EXPECT_EQ(c.find("model"), nullptr);
    EXPECT_EQ(c.add(entry("/c/model.gguf")), "model");
}

TEST(ModelCatalog, OnlyRegistryAndHubNamesArePulled) {
    EXPECT_EQ(pull_reference_for("qwen2.5:0.5b"), "ollama:qwen2.5:0.5b");
    EXPECT_EQ(pull_reference_for("phi3"), "ollama:phi3");
    EXPECT_EQ(pull_reference_for("someone/model:7b"), "ollama:someone/model:7b");
    EXPECT_EQ(pull_reference_for("hf.co/o/r:Q4_K_M"), "hf:o/r:Q4_K_M");
    EXPECT_EQ(pull_reference_for("hf:o/r"), "hf:o/r");
    EXPECT_EQ(pull_reference_for("https://example.com/m.gguf"), "https://example.com/m.gguf");
    for (const char* name : {"/etc/passwd", "../models/x.gguf", "a/b/c", "x.gguf/../..", "",
                             "hf:o/../r", "ollama:../x", "name with space", "a:b:c",
                             "hf.co/o/r/../../x.gguf"})
        EXPECT_EQ(pull_reference_for(name), std::nullopt) << name;
}

}  // namespace
}  // namespace minfer::server
