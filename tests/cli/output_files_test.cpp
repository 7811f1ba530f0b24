// `minfer quantize` end to end with outputs that are not plain files: a FIFO or device node is
// refused at once with one line and left as it was, a symlink is written through.

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/fixtures.h"
#include "gguf/gguf_file.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

std::size_t entries_in(const fs::path& dir) {
    return static_cast<std::size_t>(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

TEST(OutputFiles, QuantizeRefusesAFifo) {
    MINFER_REQUIRE_FIXTURE(input, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    const auto fifo = dir / "out.gguf";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    const auto r = test::run_minfer({"quantize", input.string(), fifo.string(), "q8_0"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(
        r.err.find(fifo.string() + ": is a FIFO (named pipe); minfer writes only to regular files"),
        std::string::npos)
        << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    struct stat st {};
    ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    EXPECT_EQ(entries_in(dir.path()), 1u) << "no temporary beside the FIFO";
}

TEST(OutputFiles, QuantizeRefusesACharacterDevice) {
    MINFER_REQUIRE_FIXTURE(input, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    const auto device = dir / "null";
    // A copy of /dev/null's node (1:3) in the temporary directory; the real one is not touched.
    if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        GTEST_SKIP() << "cannot make a device node here: " << std::strerror(errno);
    }
    const auto r = test::run_minfer({"quantize", input.string(), device.string(), "q8_0"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(": is a character device; minfer writes only to regular files"),
              std::string::npos)
        << r.err;
    struct stat st {};
    ASSERT_EQ(::lstat(device.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(st.st_rdev, makedev(1, 3));
}

TEST(OutputFiles, QuantizeWritesThroughASymlink) {
    MINFER_REQUIRE_FIXTURE(input, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    fs::create_directory(dir / "models");
    { std::ofstream(dir / "models" / "q8.gguf") << "an older model"; }
    ASSERT_EQ(::chmod((dir / "models" / "q8.gguf").c_str(), 0640), 0);
    fs::create_symlink("models/q8.gguf", dir / "current.gguf");

    const auto r = test::run_minfer(
        {"quantize", input.string(), (dir / "current.gguf").string(), "q8_0", "--threads", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;

    EXPECT_TRUE(fs::is_symlink(dir / "current.gguf"));
    EXPECT_EQ(fs::read_symlink(dir / "current.gguf"), "models/q8.gguf");
    const GgufFile written = GgufFile::open(dir / "models" / "q8.gguf");
    EXPECT_EQ(written.metadata().get<uint32_t>("general.file_type"), 7u);  // MOSTLY_Q8_0
    struct stat st {};
    ASSERT_EQ(::stat((dir / "models" / "q8.gguf").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0640u);
    EXPECT_EQ(entries_in(dir.path()), 2u);
    EXPECT_EQ(entries_in(dir / "models"), 1u) << "no temporary left beside the target";
}

TEST(OutputFiles, QuantizeRefusesASymlinkToItsInput) {
    MINFER_REQUIRE_FIXTURE(input, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    fs::create_symlink(fs::absolute(input), dir / "link.gguf");
    const auto r =
        test::run_minfer({"quantize", input.string(), (dir / "link.gguf").string(), "q8_0"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("is the input model"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
    EXPECT_EQ(entries_in(dir.path()), 1u);
}

}  // namespace
}  // namespace minfer
