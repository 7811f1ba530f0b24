// AtomicOutputFile (core/atomic_output_file.h): regular files replaced atomically with their mode
// kept, symlinks written through, devices, FIFOs, sockets and directories refused, and no
// temporary left behind when anything fails.

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "common/fixtures.h"
#include "core/atomic_output_file.h"
#include "core/error.h"
#include "core/file_io.h"

namespace minfer {
namespace {

namespace fs = std::filesystem;

void write_text(const fs::path& p, const std::string& text) {
    std::ofstream(p) << text;
}

// Writes `text` to `destination` through an AtomicOutputFile.
void replace_with(const fs::path& destination, const std::string& text) {
    AtomicOutputFile out(destination);
    out.stream() << text;
    out.commit();
}

struct stat lstat_of(const fs::path& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st;
}

// The names in `dir`, sorted: shows any temporary left behind.
std::vector<std::string> names_in(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir))
        names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// The message of the UsageError that opening `destination` throws ("" if none).
std::string usage_error_of(const fs::path& destination) {
    try {
        AtomicOutputFile out(destination);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

// Restores the umask when the test ends.
class ScopedUmask {
  public:
    explicit ScopedUmask(mode_t mask) : previous_(::umask(mask)) {}
    ~ScopedUmask() { ::umask(previous_); }
    ScopedUmask(const ScopedUmask&) = delete;
    ScopedUmask& operator=(const ScopedUmask&) = delete;

  private:
    mode_t previous_;
};

// Changes the working directory for its lifetime.
class ScopedWorkingDirectory {
  public:
    explicit ScopedWorkingDirectory(const fs::path& dir) : previous_(fs::current_path()) {
        fs::current_path(dir);
    }
    ~ScopedWorkingDirectory() { fs::current_path(previous_); }
    ScopedWorkingDirectory(const ScopedWorkingDirectory&) = delete;
    ScopedWorkingDirectory& operator=(const ScopedWorkingDirectory&) = delete;

  private:
    fs::path previous_;
};

TEST(AtomicOutputFile, CreatesAMissingFileUnderTheUmask) {
    test::TempDir dir;
    const ScopedUmask mask(027);
    replace_with(dir / "new.gguf", "data");
    EXPECT_EQ(read_file(dir / "new.gguf"), "data");
    EXPECT_EQ(lstat_of(dir / "new.gguf").st_mode & 0777, 0640u);
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"new.gguf"});
}

TEST(AtomicOutputFile, ReplacesARegularFileAndKeepsItsMode) {
    test::TempDir dir;
    const ScopedUmask mask(022);
    for (const mode_t mode : {0600u, 0751u, 0444u}) {
        const auto path = dir / "out.gguf";
        write_text(path, "old");
        ASSERT_EQ(::chmod(path.c_str(), mode), 0);
        const ino_t old_inode = lstat_of(path).st_ino;
        replace_with(path, "new");
        EXPECT_EQ(read_file(path), "new");
        const struct stat st = lstat_of(path);
        EXPECT_TRUE(S_ISREG(st.st_mode));
        EXPECT_EQ(st.st_mode & 07777, mode) << std::oct << mode;
        EXPECT_NE(st.st_ino, old_inode) << "replaced by a rename, not rewritten in place";
        EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.gguf"});
    }
}

TEST(AtomicOutputFile, KeepsTheOwnerWhenRoot) {
    if (::geteuid() != 0) GTEST_SKIP() << "only root may give a file to another user";
    test::TempDir dir;
    const auto path = dir / "out.gguf";
    write_text(path, "old");
    ASSERT_EQ(::chown(path.c_str(), 1234, 4321), 0);
    replace_with(path, "new");
    EXPECT_EQ(lstat_of(path).st_uid, 1234u);
    EXPECT_EQ(lstat_of(path).st_gid, 4321u);
}

TEST(AtomicOutputFile, WritesThroughASymlink) {
    test::TempDir dir;
    fs::create_directory(dir / "real");
    fs::create_directory(dir / "links");
    write_text(dir / "real" / "model.gguf", "old");
    ASSERT_EQ(::chmod((dir / "real" / "model.gguf").c_str(), 0640), 0);
    fs::create_symlink(dir / "real" / "model.gguf", dir / "links" / "current.gguf");

    AtomicOutputFile out(dir / "links" / "current.gguf");
    EXPECT_EQ(out.target(), dir / "real" / "model.gguf");
    EXPECT_EQ(out.path().parent_path(), dir / "real") << "the temporary sits beside the target";
    out.stream() << "new";
    out.commit();

    EXPECT_TRUE(fs::is_symlink(dir / "links" / "current.gguf"));
    EXPECT_EQ(fs::read_symlink(dir / "links" / "current.gguf"), dir / "real" / "model.gguf");
    EXPECT_EQ(read_file(dir / "real" / "model.gguf"), "new");
    EXPECT_EQ(lstat_of(dir / "real" / "model.gguf").st_mode & 0777, 0640u);
    EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"model.gguf"});
    EXPECT_EQ(names_in(dir / "links"), std::vector<std::string>{"current.gguf"});
}

TEST(AtomicOutputFile, FollowsAChainOfRelativeSymlinks) {
    test::TempDir dir;
    fs::create_directory(dir / "real");
    fs::create_directory(dir / "links");
    write_text(dir / "real" / "model.gguf", "old");
    // links/a -> b -> ../real/model.gguf, each relative to its own directory.
    fs::create_symlink("b", dir / "links" / "a");
    fs::create_symlink("../real/model.gguf", dir / "links" / "b");

    const OutputTarget target = resolve_output_target(dir / "links" / "a");
    EXPECT_EQ(fs::canonical(target.file), fs::canonical(dir / "real" / "model.gguf"));
    ASSERT_TRUE(target.existing.has_value());

    replace_with(dir / "links" / "a", "new");
    EXPECT_EQ(read_file(dir / "real" / "model.gguf"), "new");
    EXPECT_EQ(fs::read_symlink(dir / "links" / "a"), "b");
    EXPECT_EQ(fs::read_symlink(dir / "links" / "b"), "../real/model.gguf");
    EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"model.gguf"});
    EXPECT_EQ(names_in(dir / "links"), (std::vector<std::string>{"a", "b"}));
}

TEST(AtomicOutputFile, RelativeDestinationWithRelativeLink) {
    test::TempDir dir;
    write_text(dir / "model.gguf", "old");
    fs::create_symlink("model.gguf", dir / "link.gguf");
    {
        const ScopedWorkingDirectory cwd(dir.path());
        replace_with("link.gguf", "new");
    }
    EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
    EXPECT_EQ(read_file(dir / "model.gguf"), "new");
}

TEST(AtomicOutputFile, DanglingSymlinkCreatesItsTarget) {
    test::TempDir dir;
    fs::create_directory(dir / "real");
    fs::create_symlink("real/new.gguf", dir / "link.gguf");
    replace_with(dir / "link.gguf", "data");
    EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
    EXPECT_EQ(read_file(dir / "real" / "new.gguf"), "data");
    EXPECT_EQ(names_in(dir / "real"), std::vector<std::string>{"new.gguf"});
}

TEST(AtomicOutputFile, MissingDirectoryIsAnIoError) {
    test::TempDir dir;
    EXPECT_THROW(AtomicOutputFile(dir / "absent" / "x.gguf"), IoError);
    fs::create_symlink("absent/x.gguf", dir / "link.gguf");
    try {
        AtomicOutputFile out(dir / "link.gguf");
        FAIL() << "expected IoError";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("link.gguf -> "), std::string::npos) << e.what();
    }
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"link.gguf"});
}

TEST(AtomicOutputFile, SymlinkLoopIsAnIoError) {
    test::TempDir dir;
    fs::create_symlink("b", dir / "a");
    fs::create_symlink("a", dir / "b");
    try {
        AtomicOutputFile out(dir / "a");
        FAIL() << "expected IoError";
    } catch (const IoError& e) {
        EXPECT_NE(std::string(e.what()).find("symbolic links to follow"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a", "b"}));
}

TEST(AtomicOutputFile, RefusesAFifo) {
    test::TempDir dir;
    const auto fifo = dir / "pipe";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
    EXPECT_EQ(usage_error_of(fifo),
              fifo.string() + ": is a FIFO (named pipe); minfer writes only to regular files");
    fs::create_symlink("pipe", dir / "link");
    EXPECT_EQ(usage_error_of(dir / "link"),
              (dir / "link").string() + " -> " + (dir / "pipe").string() +
                  ": is a FIFO (named pipe); minfer writes only to regular files");
    EXPECT_TRUE(S_ISFIFO(lstat_of(fifo).st_mode));
    EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"link", "pipe"}));
}

TEST(AtomicOutputFile, RefusesACharacterDevice) {
    test::TempDir dir;
    const auto device = dir / "null";
    // A node like /dev/null (character device 1:3), made here so the real one is never at risk.
    if (::mknod(device.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
        GTEST_SKIP() << "cannot make a device node here: " << std::strerror(errno);
    }
    EXPECT_EQ(usage_error_of(device),
              device.string() + ": is a character device; minfer writes only to regular files");
    const struct stat st = lstat_of(device);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
    EXPECT_EQ(st.st_rdev, makedev(1, 3));
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"null"});
}

TEST(AtomicOutputFile, RefusesASocket) {
    test::TempDir dir;
    const auto path = dir / "sock";
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    ASSERT_LT(path.string().size(), sizeof(address.sun_path));
    std::strcpy(address.sun_path, path.c_str());
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(usage_error_of(path),
              path.string() + ": is a socket; minfer writes only to regular files");
    ::close(fd);
    EXPECT_TRUE(S_ISSOCK(lstat_of(path).st_mode));
}

TEST(AtomicOutputFile, RefusesADirectory) {
    test::TempDir dir;
    fs::create_directory(dir / "sub");
    EXPECT_EQ(usage_error_of(dir / "sub"),
              (dir / "sub").string() + ": is a directory; give a file path");
    EXPECT_TRUE(fs::is_directory(dir / "sub"));
    EXPECT_TRUE(fs::is_empty(dir / "sub"));
    EXPECT_THROW(AtomicOutputFile(""), UsageError);
}

TEST(AtomicOutputFile, NoCommitLeavesTheOldFileAndNoTemporary) {
    test::TempDir dir;
    write_text(dir / "out.gguf", "old");
    fs::path temporary;
    {
        AtomicOutputFile out(dir / "out.gguf");
        temporary = out.path();
        EXPECT_TRUE(temporary.filename().string().starts_with("out.gguf.tmp-")) << temporary;
        out.stream() << "half of it";
        EXPECT_TRUE(fs::exists(temporary));
    }
    EXPECT_FALSE(fs::exists(temporary));
    EXPECT_EQ(read_file(dir / "out.gguf"), "old");
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out.gguf"});
}

// The destination is looked at again at commit: what appeared there during a long write is
// refused like at the start, and the temporary is removed.
TEST(AtomicOutputFile, DestinationChangedDuringTheWrite) {
    test::TempDir dir;
    {
        AtomicOutputFile out(dir / "out");
        ASSERT_EQ(::mkfifo((dir / "out").c_str(), 0644), 0);
        out.stream() << "data";
        EXPECT_THROW(out.commit(), UsageError);
    }
    EXPECT_TRUE(S_ISFIFO(lstat_of(dir / "out").st_mode));
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out"});
    fs::remove(dir / "out");
    {
        AtomicOutputFile out(dir / "out");
        fs::create_directory(dir / "out");
        EXPECT_THROW(out.commit(), UsageError);
    }
    EXPECT_TRUE(fs::is_directory(dir / "out"));
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"out"});

    // A link redirected elsewhere: neither file is replaced.
    write_text(dir / "a", "a");
    write_text(dir / "b", "b");
    fs::create_symlink("a", dir / "link");
    {
        AtomicOutputFile out(dir / "link");
        fs::remove(dir / "link");
        fs::create_symlink("b", dir / "link");
        out.stream() << "new";
        try {
            out.commit();
            FAIL() << "expected IoError";
        } catch (const IoError& e) {
            EXPECT_NE(std::string(e.what()).find("changed while writing"), std::string::npos)
                << e.what();
        }
    }
    EXPECT_EQ(read_file(dir / "a"), "a");
    EXPECT_EQ(read_file(dir / "b"), "b");
    EXPECT_EQ(names_in(dir.path()), (std::vector<std::string>{"a", "b", "link", "out"}));
}

}  // namespace
}  // namespace minfer
