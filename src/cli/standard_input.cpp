#include "cli/standard_input.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace minfer::cli {

void require_readable_standard_input() {
    struct stat info {};
    if (::fstat(STDIN_FILENO, &info) == 0 && S_ISDIR(info.st_mode))
        throw IoError("cannot read standard input: it is a directory, expected a file or a pipe");
}

std::optional<std::string> read_standard_input_line(std::size_t max_bytes) {
    std::string line;
    int c = 0;
    errno = 0;
    while ((c = std::getc(stdin)) != EOF && c != '\n') {
        if (line.size() == max_bytes) {
            throw LimitError(concat("a line of standard input holds more than the ", max_bytes,
                                    " bytes this reads"));
        }
        line.push_back(static_cast<char>(c));
    }
    if (c == EOF) {
        if (std::ferror(stdin)) {
            throw IoError(concat("cannot read standard input: ",
                                 errno != 0 ? std::strerror(errno) : "read error"));
        }
        if (line.empty()) return std::nullopt;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    return line;
}

}  // namespace minfer::cli
