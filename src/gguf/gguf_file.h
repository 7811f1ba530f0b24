#pragma once
// A GGUF model on disk: one file, or every part of a split model, each mapped read-only and
// parsed. Tensor data are views into the mappings, valid as long as the GgufFile lives (it is
// move-only; moving keeps the views valid).

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/mapped_file.h"
#include "gguf/gguf_parser.h"

namespace minfer {

class GgufFile {
  public:
    struct Part {
        std::filesystem::path path;
        std::unique_ptr<MappedFile> mapping;  // null when parsed from caller-owned bytes
        std::span<const std::byte> bytes;
        GgufContents contents;
    };

    // Opens a file or the first part of a split model (mapping every part in order). The file's
    // metadata say which it is: without split.count (or with split.count <= 1) it is a whole model
    // whatever its name (x-00002-of-00003.gguf included); with split.count = N > 1 its name must
    // be PREFIX-00001-of-N.gguf (a later part is refused, naming part 1) and the other parts are
    // found by name and checked (split.no, split.count, split.tensors.count). Throws IoError /
    // FormatError naming the file.
    static GgufFile open(const std::filesystem::path& path);
    // Parses bytes the caller keeps alive (tests, fuzzing); no split handling.
    static GgufFile from_bytes(std::span<const std::byte> bytes, std::string name);

    GgufFile(GgufFile&&) noexcept = default;
    GgufFile& operator=(GgufFile&&) noexcept = default;
    GgufFile(const GgufFile&) = delete;
    GgufFile& operator=(const GgufFile&) = delete;

    const std::filesystem::path& path() const { return parts_.front().path; }
    const std::vector<Part>& parts() const { return parts_; }
    // The model's metadata: the first part's.
    const GgufMetadata& metadata() const { return parts_.front().contents.metadata; }
    const GgufContents& first_part() const { return parts_.front().contents; }
    // Every tensor of every part, in part order.
    const std::vector<const TensorInfo*>& tensors() const { return tensors_; }
    const TensorInfo* find_tensor(std::string_view name) const;
    // Throws FormatError "<file>: tensor 'name' is missing".
    const TensorInfo& tensor(std::string_view name) const;
    // Bytes of all parts on disk.
    uint64_t file_size() const;

  private:
    GgufFile() = default;
    void index_tensors();

    struct StringHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const {
            return std::hash<std::string_view>{}(s);
        }
    };

    std::vector<Part> parts_;
    std::vector<const TensorInfo*> tensors_;
    std::unordered_map<std::string, const TensorInfo*, StringHash, std::equal_to<>> by_name_;
};

// Resolves what a user typed as MODEL to a GGUF path: a file is itself; a directory must hold
// exactly one model (one .gguf, or the parts of one split model), else an Error lists them. The
// parts of a split name are entered through the lowest-numbered one present: part 1, or else a
// file like x-00002-of-00003.gguf, which opens if its metadata say it is whole.
std::filesystem::path resolve_model_path(const std::filesystem::path& path);

}  // namespace minfer
