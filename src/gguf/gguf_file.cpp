#include "gguf/gguf_file.h"

#include <algorithm>
#include <set>
#include <utility>

#include "core/error.h"
#include "gguf/split_path.h"

namespace minfer {
namespace {

GgufFile::Part map_and_parse(const std::filesystem::path& path) {
    auto mapping = std::make_unique<MappedFile>(path);
    auto bytes = mapping->bytes();
    GgufContents contents = parse_gguf(bytes, path.string());
    return {path, std::move(mapping), bytes, std::move(contents)};
}

int64_t split_key(const GgufMetadata& meta, std::string_view key,
                  const std::filesystem::path& path) {
    if (!meta.contains(key)) {
        throw FormatError(
            concat(path.string(), ": part of a split model without the '", key, "' key"));
    }
    return meta.get_int(key);
}

}  // namespace

GgufFile GgufFile::open(const std::filesystem::path& path) {
    // The metadata decide whether this is a split part; the name only says where the other parts
    // are. A whole model (no split.count, or split.count <= 1 as llama.cpp reads it) opens as one
    // file whatever its name, so x-00001-of-00002.gguf may be a complete model.
    GgufFile file;
    file.parts_.push_back(map_and_parse(path));
    const int64_t count_in_file = file.metadata().get_int_optional("split.count").value_or(1);
    if (count_in_file > 1) {
        const auto split = parse_split_name(path);
        if (!split) {
            throw FormatError(concat(path.string(), ": has split.count = ", count_in_file,
                                     " but its name does not follow NAME-00001-of-", count_in_file,
                                     ".gguf, so its other parts cannot be found"));
        }
        if (split->index != 1) {
            throw FormatError(concat(path.string(), ": is part ", split->index, " of ",
                                     split->count, " of a split model; open the first part: ",
                                     split_part_path(split->prefix, 1, split->count).string()));
        }
        const int name_count = split->count;
        if (count_in_file != name_count) {
            throw FormatError(concat(path.string(), ": split.count is ", count_in_file,
                                     " but the file name says ", name_count, " parts"));
        }
        for (int i = 2; i <= name_count; ++i) {
            const auto part_path = split_part_path(split->prefix, i, name_count);
            if (!std::filesystem::exists(part_path)) {
                throw IoError(concat(path.string(), ": part ", i, " of ", name_count,
                                     " is missing: ", part_path.string()));
            }
            file.parts_.push_back(map_and_parse(part_path));
        }
        uint64_t n_tensors = 0;
        for (std::size_t i = 0; i < file.parts_.size(); ++i) {
            const auto& part = file.parts_[i];
            const int64_t no = split_key(part.contents.metadata, "split.no", part.path);
            if (no != static_cast<int64_t>(i)) {
                throw FormatError(
                    concat(part.path.string(), ": split.no is ", no, ", expected ", i));
            }
            const int64_t count = split_key(part.contents.metadata, "split.count", part.path);
            if (count != name_count) {
                throw FormatError(concat(part.path.string(), ": split.count is ", count,
                                         ", expected ", name_count));
            }
            n_tensors += part.contents.tensors.size();
        }
        const int64_t declared = split_key(file.metadata(), "split.tensors.count", path);
        if (declared < 0 || static_cast<uint64_t>(declared) != n_tensors) {
            throw FormatError(concat(path.string(), ": split.tensors.count is ", declared,
                                     " but the ", name_count, " parts hold ", n_tensors,
                                     " tensors"));
        }
    }
    file.index_tensors();
    return file;
}

GgufFile GgufFile::from_bytes(std::span<const std::byte> bytes, std::string name) {
    GgufFile file;
    GgufContents contents = parse_gguf(bytes, name);
    file.parts_.push_back({std::filesystem::path(name), nullptr, bytes, std::move(contents)});
    file.index_tensors();
    return file;
}

void GgufFile::index_tensors() {
    for (const auto& part : parts_) {
        for (const auto& t : part.contents.tensors) {
            if (!by_name_.emplace(t.name, &t).second) {
                throw FormatError(concat(part.path.string(), ": tensor '", t.name,
                                         "' also appears in an earlier part"));
            }
            tensors_.push_back(&t);
        }
    }
}

const TensorInfo* GgufFile::find_tensor(std::string_view name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
}

const TensorInfo& GgufFile::tensor(std::string_view name) const {
    const TensorInfo* t = find_tensor(name);
    if (t == nullptr)
        throw FormatError(concat(path().string(), ": tensor '", name, "' is missing"));
    return *t;
}

uint64_t GgufFile::file_size() const {
    uint64_t total = 0;
    for (const auto& p : parts_) total += p.bytes.size();
    return total;
}

std::filesystem::path resolve_model_path(const std::filesystem::path& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        throw IoError(concat(path.string(), ": no such file or directory"));
    }
    if (!std::filesystem::is_directory(path, ec)) return path;

    std::vector<std::filesystem::path> ggufs;
    for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == ".gguf")
            ggufs.push_back(entry.path());
    }
    std::sort(ggufs.begin(), ggufs.end());
    // The parts of one split model count as one model, entered through the lowest-numbered part
    // present (sorted names put it first): part 1, or else a file that may be a whole model under
    // a split-like name, or a part whose opening names the missing part 1.
    std::vector<std::filesystem::path> models;
    std::set<std::pair<std::string, int>> split_sets;  // (prefix, count) already entered
    for (const auto& p : ggufs) {
        const auto split = parse_split_name(p);
        if (!split || split_sets.emplace(split->prefix, split->count).second) models.push_back(p);
    }
    if (models.size() == 1) return models.front();
    if (models.empty())
        throw IoError(concat(path.string(), ": is a directory with no .gguf file in it"));
    std::string list;
    for (const auto& m : models) list += concat(list.empty() ? "" : ", ", m.filename().string());
    throw UsageError(
        concat(path.string(), ": is a directory; GGUF files in it: ", list, " (name one of them)"));
}

}  // namespace minfer
