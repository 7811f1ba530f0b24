// tools/make_model, the program that writes the benchmark models, held to minfer's rules: exit
// status 2 for a bad command line (not CLI11's own codes), outputs that are not regular files
// refused, its one line of output checked and escaped. Its llama-tiny shape (8 MB) keeps this
// quick.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/fixtures.h"
#include "common/process.h"
#include "gguf/gguf_file.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

test::CommandResult make_model(const std::vector<std::string>& args,
                               test::ProcessOptions options = {}) {
    options.binary = MINFER_MAKE_MODEL_BINARY;
    return test::run_minfer_process(args, options);
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

int count_lines(const std::string& s) {
    return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

TEST(MakeModel, BadCommandLinesExitTwoWithOneLine) {
    MINFER_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-spm.gguf");
    test::TempDir dir;
    const std::string out = (dir / "out.gguf").string();
    const std::vector<std::vector<std::string>> cases = {
        {"--vocab", vocab.string(), out},                                // no --shape
        {"--shape", "llama-9b", "--vocab", vocab.string(), out},         // unknown shape
        {"--shape", "llama-tiny", "--vocab", dir.path().string(), out},  // a directory
        {"--shape", "llama-tiny", "--vocab", vocab.string(), "--chat-template", dir.path().string(),
         out},
        {"--shape", "llama-tiny", "--vocab", vocab.string(), dir.path().string()},  // OUT a dir
    };
    for (const auto& args : cases) {
        const auto r = make_model(args);
        EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;  // CLI11 said 105, 106
        EXPECT_TRUE(contains(r.err, "make_model: error: ")) << r.err;
        EXPECT_EQ(count_lines(r.err), 1) << r.err;
    }
    EXPECT_FALSE(fs::exists(out));
}

TEST(MakeModel, RefusesAFifoAndWritesThroughASymlink) {
    MINFER_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-spm.gguf");
    test::TempDir dir;
    const auto fifo = dir / "fifo.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    const auto refused =
        make_model({"--shape", "llama-tiny", "--vocab", vocab.string(), fifo.string()});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_TRUE(contains(refused.err, "is a FIFO (named pipe)")) << refused.err;
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));

    const auto target = dir / "model.gguf", link = dir / "link.gguf";
    fs::create_symlink("model.gguf", link);
    const auto r = make_model({"--shape", "llama-tiny", "--vocab", vocab.string(), link.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::is_symlink(link));
    // token_embd, output_norm, output, then 9 per layer: the model is whole.
    EXPECT_EQ(GgufFile::open(target).tensors().size(), 3u + 2u * 9u);
}

TEST(MakeModel, ItsOutputLineIsCheckedAndEscaped) {
    MINFER_REQUIRE_FIXTURE(vocab, "vocab/ggml-vocab-llama-spm.gguf");
    test::TempDir dir;
    const std::string odd = (dir / "a\x1b[31mb.gguf").string();
    const auto r = make_model({"--shape", "llama-tiny", "--vocab", vocab.string(), odd});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "a\\x1b[31mb.gguf: llama-tiny")) << r.out;
    EXPECT_FALSE(contains(r.out, "\x1b")) << r.out;

    test::ProcessOptions full;
    full.stdout_path = "/dev/full";
    const auto f = make_model(
        {"--shape", "llama-tiny", "--vocab", vocab.string(), (dir / "m.gguf").string()}, full);
    EXPECT_EQ(f.exit_code, 1) << f.err;  // was 0
    EXPECT_TRUE(contains(f.err, "make_model: error: write error: No space left on device"))
        << f.err;
}

}  // namespace
}  // namespace minfer
