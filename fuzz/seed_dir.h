#pragma once
// The seed folder of a fuzz target. scripts/fuzz.sh sets MINFER_FUZZ_SEED_DIR to the target's
// corpus; LLVMFuzzerInitialize writes its seeds there only while the folder is empty, so a later
// run keeps what the fuzzer found.

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <system_error>

namespace minfer::fuzz {

// The folder to write seeds into (created if missing), or nothing when the variable is unset, the
// folder cannot be made or already holds a corpus.
inline std::optional<std::filesystem::path> empty_seed_dir() {
    const char* dir = std::getenv("MINFER_FUZZ_SEED_DIR");
    if (dir == nullptr) return std::nullopt;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_empty(dir, ec) || ec) return std::nullopt;
    return std::filesystem::path(dir);
}

}  // namespace minfer::fuzz
