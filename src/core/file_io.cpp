#include "core/file_io.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace minfer {

std::string read_file(const std::filesystem::path& path, std::string_view what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IoError(concat("cannot read ", what, " '", path.string(), "'"));
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw IoError(concat("error reading ", what, " '", path.string(), "'"));
    return text.str();
}

}  // namespace minfer
