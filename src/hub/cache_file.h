#pragma once
// The small files the caches keep beside the models (refs, file lists, manifests, URL records):
// written whole or not at all, so that a crash or a concurrent reader never sees half of one.

#include <filesystem>
#include <string_view>

namespace minfer::hub {

// Creates the parent directories, then replaces `path` atomically (core/atomic_output_file.h).
// Throws IoError naming the directory or the file.
void write_cache_file(const std::filesystem::path& path, std::string_view text);

}  // namespace minfer::hub
