// `minfer info` end to end: text and JSON on the fixtures, directories, errors, --help.

#include <gtest/gtest.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "core/utf8.h"
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
    EXPECT_EQ(r.exit_code, 2);  // an ambiguous MODEL argument: a usage error
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

// Metadata and tensor names are the file's, not ours: what they hold must not reach the terminal
// as escape sequences or break lines.
void write_hostile_model(const std::filesystem::path& path) {
    static const std::vector<float> data(4, 1.0f);
    GgufWriter w;
    auto& m = w.metadata();
    m.set("general.architecture", GgufValue::string("llama\x1b]0;title\x07"));
    m.set("general.name", GgufValue::string("\x1b[31mred\n"));
    m.set("evil.\x1b[2Jkey", GgufValue::string("plain"));
    m.set("evil.invalid", GgufValue::string("bad \xff\xfe utf8, c1 \xc2\x9b, lone \x9b"
                                            "31m"));
    m.set("evil.array", GgufValue::array(GgufArray::of_strings({"fine", "\x1b[1m", "\xc3"})));
    w.add_tensor("t.\x1b[31m\nx", GgmlType::F32, {4}, std::as_bytes(std::span(data)));
    w.write_file(path);
}

// The lines of `text` that contain `needle`.
std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
    std::vector<std::string> found;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        if (line.find(needle) != std::string::npos) found.push_back(line);
        start = end + 1;
    }
    return found;
}

TEST(InfoCommand, TextEscapesControlCharactersAndInvalidUtf8) {
    test::TempDir dir;
    write_hostile_model(dir / "hostile.gguf");
    const auto r = run_minfer({"info", (dir / "hostile.gguf").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "a raw ESC reached the terminal";
    EXPECT_EQ(r.out.find('\x07'), std::string::npos);
    EXPECT_TRUE(is_valid_utf8(r.out)) << "invalid UTF-8 (or a raw 0x9b CSI byte) in the output";
    EXPECT_EQ(r.out.find("\xc2\x9b"), std::string::npos) << "a raw C1 CSI in the output";

    // Each value stays on its key's line.
    const auto name = lines_with(r.out, "general.name");
    ASSERT_EQ(name.size(), 1u) << r.out;
    EXPECT_NE(name[0].find(R"("\x1b[31mred\n")"), std::string::npos) << name[0];
    const auto invalid = lines_with(r.out, "evil.invalid");
    ASSERT_EQ(invalid.size(), 1u) << r.out;
    EXPECT_NE(invalid[0].find(R"("bad \xff\xfe utf8, c1 \u009b, lone \x9b31m")"), std::string::npos)
        << invalid[0];
    const auto array = lines_with(r.out, "evil.array");
    ASSERT_EQ(array.size(), 1u) << r.out;
    EXPECT_NE(array[0].find(R"(["fine", "\x1b[1m", "\xc3"])"), std::string::npos) << array[0];
    EXPECT_EQ(lines_with(r.out, R"(evil.\x1b[2Jkey)").size(), 1u) << r.out;
    EXPECT_EQ(lines_with(r.out, R"(t.\x1b[31m\nx)").size(), 1u) << r.out;
    EXPECT_EQ(lines_with(r.out, R"(name:           \x1b[31mred\n)").size(), 1u) << r.out;
    EXPECT_EQ(lines_with(r.out, R"(architecture:   llama\x1b]0;title\x07)").size(), 1u) << r.out;
}

TEST(InfoCommand, JsonKeepsControlCharactersAndReplacesInvalidUtf8) {
    test::TempDir dir;
    write_hostile_model(dir / "hostile.gguf");
    const auto r = run_minfer({"info", "--json", (dir / "hostile.gguf").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "JSON escapes ESC as \\u001b";
    EXPECT_TRUE(is_valid_utf8(r.out));
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["summary"]["name"], "\x1b[31mred\n");  // exact, through JSON's escapes
    EXPECT_EQ(doc["tensors"][0]["name"], "t.\x1b[31m\nx");
    bool found = false;
    for (const auto& m : doc["metadata"]) {
        if (m["key"] == "evil.invalid") {
            found = true;
            // Each invalid byte becomes U+FFFD; the valid C1 code point U+009B is kept.
            EXPECT_EQ(m["value"],
                      "bad \xef\xbf\xbd\xef\xbf\xbd utf8, c1 \xc2\x9b, lone "
                      "\xef\xbf\xbd"
                      "31m");
        }
    }
    EXPECT_TRUE(found);
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
