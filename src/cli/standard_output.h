#pragma once
// Writing to standard output with every failure reported: a full disk or a closed pipe is
// `minfer: error: write error: ...` and exit status 1 (as coreutils do), never a silent success.

#include <string_view>

namespace minfer::cli {

// Writes text and flushes it at once (streamed answers); throws IoError on a failed write, so a
// generation stops as soon as nobody can read it.
void write_streamed(std::string_view text);

// Flushes stdout and checks that everything printed by any means (printf, std::cout) was
// written; throws IoError "write error: ..." otherwise. Called by main after every command.
void finish_standard_output();

}  // namespace minfer::cli
