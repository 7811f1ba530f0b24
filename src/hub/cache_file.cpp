#include "hub/cache_file.h"

#include "core/atomic_output_file.h"
#include "core/error.h"

namespace minfer::hub {

void write_cache_file(const std::filesystem::path& path, std::string_view text) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) {
        throw IoError(
            concat(path.parent_path().string(), ": cannot create the directory: ", ec.message()));
    }
    AtomicOutputFile out(path);
    out.stream() << text;
    out.commit();
}

}  // namespace minfer::hub
