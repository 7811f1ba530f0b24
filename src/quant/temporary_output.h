#pragma once
// Writing a file atomically: the data go to a fresh DEST.tmp-XXXXXX beside DEST, which is renamed
// onto DEST only once complete and flushed to disk. If anything fails or the process dies before
// commit(), DEST is untouched (a crash may leave the temporary behind; an exception removes it).

#include <filesystem>
#include <fstream>

namespace minfer {

class TemporaryOutputFile {
  public:
    // Creates the temporary (O_EXCL, mode 0666 less the umask) and opens it for writing. Throws
    // IoError naming the directory when it cannot.
    explicit TemporaryOutputFile(std::filesystem::path destination);
    // Removes the temporary unless commit() succeeded.
    ~TemporaryOutputFile();
    TemporaryOutputFile(const TemporaryOutputFile&) = delete;
    TemporaryOutputFile& operator=(const TemporaryOutputFile&) = delete;

    const std::filesystem::path& path() const { return temporary_; }
    std::ofstream& stream() { return stream_; }

    // Closes, syncs and renames the temporary onto the destination. Throws IoError on failure.
    void commit();

  private:
    std::filesystem::path destination_;
    std::filesystem::path temporary_;
    std::ofstream stream_;
    bool committed_ = false;
};

}  // namespace minfer
