#include "cli/standard_output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "core/error.h"

namespace minfer::cli {
namespace {

[[noreturn]] void throw_write_error(int error_number) {
    throw IoError(concat("write error: ", error_number != 0
                                              ? std::strerror(error_number)
                                              : "standard output could not be written"));
}

}  // namespace

void write_streamed(std::string_view text) {
    errno = 0;
    if (!text.empty() && std::fwrite(text.data(), 1, text.size(), stdout) != text.size())
        throw_write_error(errno);
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) throw_write_error(errno);
}

void finish_standard_output() {
    // stdio keeps no record of why an earlier buffered write failed; the failed write was the
    // last call to fail, so errno still says why unless this final flush says it afresh.
    const int earlier = errno;
    errno = 0;
    std::cout.flush();
    const bool flushed = std::fflush(stdout) == 0;
    const int now = errno;
    if (!flushed || std::ferror(stdout) || std::cout.fail()) throw_write_error(now ? now : earlier);
}

}  // namespace minfer::cli
