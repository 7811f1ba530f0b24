#pragma once
// Writing an output file the way a careful tool does: the data go to a fresh TARGET.tmp-XXXXXX
// beside the file they are for, which is renamed onto it only once complete and flushed to disk.
// If anything fails or the process dies before commit(), the old file is untouched (a crash may
// leave the temporary behind; an exception removes it).
//
// What a destination may be:
//   a regular file     replaced atomically; the replacement keeps its permission bits (0777 part:
//                      set-id and sticky bits are dropped, as cp without -p does) and, where the
//                      process may (root), its owner and group. Other hard links to the old file
//                      keep the old contents, as with any atomic replacement.
//   missing            created (mode 0666 less the umask); its directory must exist.
//   a symbolic link    written through: links are followed (a chain, relative links relative to
//                      the link's directory) and the file they end at is replaced as above; the
//                      links stay links. A dangling link creates the file it names, as a shell's
//                      `>` does (GNU cp refuses instead): a link is a request to write there.
//   anything else      refused before any work with UsageError "PATH: is a character device;
//                      minfer writes only to regular files" (also a block device, FIFO, socket),
//                      or "PATH: is a directory; give a file path". Writing a device or a FIFO
//                      through a rename would replace the node (as root) instead of writing to it.

#include <sys/types.h>

#include <filesystem>
#include <fstream>
#include <optional>

namespace minfer {

struct OutputTarget {
    std::filesystem::path destination;  // as given
    std::filesystem::path file;         // after following symlinks: the file to replace or create
    struct Existing {
        mode_t permissions;  // st_mode & 0777
        uid_t owner;
        gid_t group;
    };
    std::optional<Existing> existing;  // nullopt when `file` does not exist yet
};

// Follows `destination`'s symlinks (at most 40, as Linux does) and checks that what it ends at
// may be written as above. Cheap: callers with long work ahead call it before starting. Throws
// UsageError for a directory, device, FIFO or socket, IoError when the path cannot be examined or
// the directory that would hold the file does not exist.
OutputTarget resolve_output_target(const std::filesystem::path& destination);

class AtomicOutputFile {
  public:
    // Resolves and checks the destination (resolve_output_target), then creates the temporary
    // beside the target (O_EXCL, mode 0666 less the umask) and opens it for writing. Throws as
    // resolve_output_target does, or IoError naming the temporary when it cannot be created.
    explicit AtomicOutputFile(const std::filesystem::path& destination);
    // Removes the temporary unless commit() succeeded.
    ~AtomicOutputFile();
    AtomicOutputFile(const AtomicOutputFile&) = delete;
    AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

    // The temporary being written.
    const std::filesystem::path& path() const { return temporary_; }
    // The file that commit() replaces (symlinks followed).
    const std::filesystem::path& target() const { return target_.file; }
    std::ofstream& stream() { return stream_; }

    // Closes and syncs the temporary, gives it the old file's mode and owner, checks the
    // destination again (it may have changed during a long write: a FIFO or directory put there
    // meanwhile is refused as above, a target that now resolves elsewhere is an IoError) and
    // renames the temporary onto the target. Throws on failure, leaving the temporary to the
    // destructor.
    void commit();

  private:
    OutputTarget target_;
    std::filesystem::path temporary_;
    std::ofstream stream_;
    bool committed_ = false;
};

}  // namespace minfer
