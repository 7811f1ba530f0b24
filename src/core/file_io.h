#pragma once
// Reading a whole (small) file: prompts, templates, messages, fixtures. Model files are mapped
// instead (core/mapped_file.h).

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace minfer {

// The most read_file reads unless told otherwise: far more than any prompt or template, far less
// than would hurt (`-f /dev/zero` must end in an error, not in an exhausted machine).
inline constexpr std::size_t kMaxTextFileBytes = std::size_t{64} << 20;

// The bytes of the file at `path`. Throws IoError naming `what` ("the prompt file") and the path
// when it cannot be opened or read, is a directory, or holds more than max_bytes. Pipes and
// FIFOs are read to their end (`-f <(cmd)` works).
std::string read_file(const std::filesystem::path& path, std::string_view what = "file",
                      std::size_t max_bytes = kMaxTextFileBytes);

}  // namespace minfer
