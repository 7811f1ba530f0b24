// `minfer info` end to end: text and JSON on the fixtures, directories, errors, --help.

#include <gtest/gtest.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "gguf/gguf_writer.h"

namespace minfer {
namespace {

using test::run_minfer;

TEST(InfoCommand, TextSummaryOfStories) {
    MINFER_REQUIRE_FIXTURE(path, "models/stories260K.gguf");
    const auto r = run_minfer({"info", path.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("File: 1185376 bytes (1.1 MB) in 1 part(s)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("GGUF v3: 19 KV, 48 tensors, alignment 32, data at offset"),
              std::string::npos);
    EXPECT_NE(r.out.find("llama.block_count"), std::string::npos);
    EXPECT_NE(r.out.find("(512 items)"), std::string::npos);  // long arrays abbreviated
    EXPECT_NE(r.out.find("blk.4.ffn_norm.weight"), std::string::npos);
    EXPECT_NE(r.out.find("architecture:   llama"), std::string::npos);
    EXPECT_NE(r.out.find("f32 x48"), std::string::npos);
    EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(InfoCommand, JsonDocument) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-llama-q4_0.gguf");
    const auto r = run_minfer({"info", "--json", path.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["gguf"]["version"], 3);
    EXPECT_EQ(doc["tensors"].size(), 39u);
    EXPECT_EQ(doc["summary"]["architecture"], "llama");
    EXPECT_EQ(doc["summary"]["tensors_per_type"]["q4_0"], 29);
    EXPECT_EQ(doc["summary"]["tensors_per_type"]["q6_K"], 1);
    EXPECT_EQ(doc["summary"]["tensors_per_type"]["f32"], 9);
    bool found_tokens = false;
    for (const auto& m : doc["metadata"]) {
        if (m["key"] == "tokenizer.ggml.tokens") {
            found_tokens = true;
            EXPECT_EQ(m["count"], 512);
            EXPECT_LT(m["value"].size(), 512u);
        }
    }
    EXPECT_TRUE(found_tokens);
    const auto full =
        nlohmann::json::parse(run_minfer({"info", "--json", "--full", path.string()}).out);
    for (const auto& m : full["metadata"])
        if (m["key"] == "tokenizer.ggml.tokens") {
            EXPECT_EQ(m["value"].size(), 512u);
        }
}

TEST(InfoCommand, DirectoryListsItsFiles) {
    test::TempDir dir;
    GgufWriter().write_file(dir / "a.gguf");
    GgufWriter().write_file(dir / "b.gguf");
    const auto r = run_minfer({"info", dir.path().string()});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("is a directory; GGUF files in it: a.gguf, b.gguf"), std::string::npos)
        << r.err;
    std::filesystem::remove(dir / "b.gguf");
    EXPECT_EQ(run_minfer({"info", dir.path().string()}).exit_code, 0);
}

TEST(InfoCommand, ErrorsAreOneLineAndExitOne) {
    test::TempDir dir;
    { std::ofstream(dir / "notes.txt") << "this is not a model\n"; }
    for (const auto& args :
         std::vector<std::vector<std::string>>{{"info", (dir / "missing.gguf").string()},
                                               {"info", (dir / "notes.txt").string()},
                                               {"info"},
                                               {"info", "--bogus", (dir / "notes.txt").string()}}) {
        const auto r = run_minfer(args);
        EXPECT_NE(r.exit_code, 0) << args.back();
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
        EXPECT_TRUE(r.out.empty());
    }
    const auto r = run_minfer({"info", (dir / "notes.txt").string()});
    EXPECT_NE(r.err.find("not a GGUF file: magic is 'this', expected 'GGUF'"), std::string::npos)
        << r.err;
}

TEST(Cli, HelpAndVersion) {
    const auto help = run_minfer({"--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.out.find("info"), std::string::npos);
    const auto help_info = run_minfer({"help", "info"});
    EXPECT_EQ(help_info.exit_code, 0);
    EXPECT_NE(help_info.out.find("--json"), std::string::npos);
    const auto version = run_minfer({"--version"});
    EXPECT_EQ(version.exit_code, 0);
    EXPECT_NE(version.out.find("minfer "), std::string::npos);
    EXPECT_NE(run_minfer({"help", "nonsense"}).exit_code, 0);
    EXPECT_NE(run_minfer({"nonsense"}).exit_code, 0);
}

}  // namespace
}  // namespace minfer
