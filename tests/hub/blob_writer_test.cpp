// The download's file side: bytes handed over in pieces of any length reach the file in order
// and the digest is of the whole file, including bytes kept from an earlier run.

#include "hub/blob_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <random>

#include "common/fixtures.h"
#include "core/file_io.h"

namespace minfer::hub {
namespace {

using test::TempDir;

std::vector<std::byte> random_bytes(std::size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> bytes(n);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    return bytes;
}

// Hands `bytes` over in pieces of 1 byte to 3 MiB (across the 1 MiB staging buffers).
void write_in_pieces(BlobWriter& writer, std::span<const std::byte> bytes, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::size_t> piece(1, std::size_t{3} << 20);
    while (!bytes.empty()) {
        const std::size_t n = std::min(bytes.size(), rng() % 4 == 0 ? rng() % 100 + 1 : piece(rng));
        writer.write(bytes.first(n));
        bytes = bytes.subspan(n);
    }
}

struct OpenFile {
    int fd;
    explicit OpenFile(const std::filesystem::path& path)
        : fd(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {}
    ~OpenFile() { ::close(fd); }
};

TEST(BlobWriter, PiecesOfAnyLengthReachTheFileInOrder) {
    TempDir dir;
    const auto path = dir / "blob.incomplete";
    const auto bytes = random_bytes((std::size_t{9} << 20) + 12345, 1);
    OpenFile file(path);
    BlobWriter writer(file.fd, path, DigestKind::Sha256, 0, 0);
    write_in_pieces(writer, bytes, 2);
    EXPECT_EQ(writer.written(), bytes.size());
    EXPECT_EQ(writer.digest(), sha256_hex(bytes));
    const std::string on_disk = read_file(path, "blob", std::size_t{1} << 30);
    ASSERT_EQ(on_disk.size(), bytes.size());
    EXPECT_EQ(std::memcmp(on_disk.data(), bytes.data(), bytes.size()), 0);
}

TEST(BlobWriter, BytesKeptFromAnEarlierRunAreHashedFirst) {
    TempDir dir;
    const auto path = dir / "blob.incomplete";
    const auto bytes = random_bytes((std::size_t{5} << 20) + 7, 3);
    const std::size_t kept = (std::size_t{2} << 20) + 999;
    {
        OpenFile file(path);
        ASSERT_EQ(::write(file.fd, bytes.data(), kept), static_cast<ssize_t>(kept));
    }
    OpenFile file(path);
    ASSERT_EQ(::lseek(file.fd, static_cast<off_t>(kept), SEEK_SET), static_cast<off_t>(kept));
    BlobWriter writer(file.fd, path, DigestKind::Sha256, 0, kept);
    EXPECT_EQ(writer.written(), kept);
    write_in_pieces(writer, std::span(bytes).subspan(kept), 4);
    EXPECT_EQ(writer.digest(), sha256_hex(bytes));
    // The unaligned head after the kept bytes goes through the page cache, the rest directly
    // where the file system allows: the file holds every byte in place either way.
    const std::string on_disk = read_file(path, "blob", std::size_t{1} << 30);
    ASSERT_EQ(on_disk.size(), bytes.size());
    EXPECT_EQ(std::memcmp(on_disk.data(), bytes.data(), bytes.size()), 0);
}

TEST(BlobWriter, RestartStartsTheFileAndTheHashOver) {
    TempDir dir;
    const auto path = dir / "blob.incomplete";
    const auto first = random_bytes((std::size_t{3} << 20) + 5, 5);
    const auto second = random_bytes((std::size_t{2} << 20) + 17, 6);
    OpenFile file(path);
    BlobWriter writer(file.fd, path, DigestKind::Sha256, 0, 0);
    write_in_pieces(writer, first, 7);
    writer.restart();
    EXPECT_EQ(writer.written(), 0u);
    write_in_pieces(writer, second, 8);
    EXPECT_EQ(writer.digest(), sha256_hex(second));
    EXPECT_EQ(std::filesystem::file_size(path), second.size());
}

// Interrupted: what was handed over is written before the writer goes, so the next run resumes
// after every byte that arrived.
TEST(BlobWriter, StoppingKeepsEveryByteHandedOver) {
    TempDir dir;
    const auto path = dir / "blob.incomplete";
    const auto bytes = random_bytes((std::size_t{4} << 20) + 321, 9);
    OpenFile file(path);
    BlobWriter writer(file.fd, path, DigestKind::Sha256, 0, 0);
    write_in_pieces(writer, bytes, 10);
    EXPECT_EQ(writer.stop_and_keep(), bytes.size());
    EXPECT_EQ(std::filesystem::file_size(path), bytes.size());
}

// A file descriptor that refuses writes (read-only): the error reaches the network side at its
// next call, and the digest is not given.
TEST(BlobWriter, AWriteErrorReachesTheCaller) {
    TempDir dir;
    const auto path = dir / "blob.incomplete";
    { OpenFile create(path); }
    const int fd = ::open(path.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    {
        BlobWriter writer(fd, path, DigestKind::Sha256, 0, 0);
        const auto bytes = random_bytes(std::size_t{3} << 20, 11);
        EXPECT_THROW(
            {
                write_in_pieces(writer, bytes, 12);
                writer.digest();
            },
            IoError);
        EXPECT_EQ(writer.stop_and_keep(), 0u);
    }
    ::close(fd);
}

}  // namespace
}  // namespace minfer::hub
