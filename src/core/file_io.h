#pragma once
// Reading a whole (small) file: prompts, templates, fixtures. Model files are mapped instead
// (core/mapped_file.h).

#include <filesystem>
#include <string>
#include <string_view>

namespace minfer {

// The bytes of the file at `path`; throws IoError "cannot read <what> 'path'" when it cannot be
// opened or read. `what` names the file for the user ("the prompt file", "template file").
std::string read_file(const std::filesystem::path& path, std::string_view what = "file");

}  // namespace minfer
