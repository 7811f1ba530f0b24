#pragma once
// A file mapped read-only into memory. It owns the mapping: every std::span handed out by
// bytes() is valid for as long as this object lives (and after moves, since the address of the
// mapping never changes). Nothing is read until a page is touched.

#include <cstddef>
#include <filesystem>
#include <span>

namespace minfer {

class MappedFile {
  public:
    // Throws IoError naming the path when the file cannot be opened or mapped.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    std::size_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }

  private:
    void release() noexcept;

    std::filesystem::path path_;
    const std::byte* data_ = nullptr;
    std::size_t size_ = 0;
};

// Asks the kernel to read the pages under `bytes` ahead, in the background (madvise
// MADV_WILLNEED; a hint: nothing happens where it is refused). For memory that will be read at
// random, one page at a time, such as a token embedding table: each first touch of a page not in
// the page cache would otherwise wait for the disk (a few milliseconds on the development VM).
void read_ahead(std::span<const std::byte> bytes);

}  // namespace minfer
