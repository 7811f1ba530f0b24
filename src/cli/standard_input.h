#pragma once
// Reading a script's lines from standard input (`printf 'Hi\n' | minfer chat MODEL`) with every
// failure reported: a directory or an I/O error is an error rather than an empty script ending in
// success, and an endless line (`chat < /dev/zero`) ends in an error instead of exhausting memory.

#include <cstddef>
#include <optional>
#include <string>

#include "core/file_io.h"

namespace minfer::cli {

// Throws IoError "cannot read standard input: it is a directory" when it is one: called before a
// model is loaded, so that the mistake costs nothing.
void require_readable_standard_input();

// The next line of standard input without its "\n" or "\r\n" (a last line without one counts);
// nullopt at the end. Throws IoError when standard input cannot be read and LimitError for a line
// of more than max_bytes.
std::optional<std::string> read_standard_input_line(std::size_t max_bytes = kMaxTextFileBytes);

}  // namespace minfer::cli
