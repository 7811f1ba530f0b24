#pragma once
// Test helpers: locating ../shared fixtures (fail loudly in CI when missing, skip elsewhere) and
// running the `minfer` binary.

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace minfer::test {

std::filesystem::path shared_dir();
// shared_dir() / "fixtures" / relative
std::filesystem::path fixture_path(const std::string& relative);
// True when the CI environment variable is set (and not "0"/"false").
bool in_ci();

struct CommandResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};
// Runs the built minfer binary with `args` (each passed as one argument), optional stdin text and
// extra environment variables.
CommandResult run_minfer(const std::vector<std::string>& args, const std::string& stdin_text = "",
                         const std::vector<std::pair<std::string, std::string>>& env = {});
// run_minfer with the binary started through `wrapper`, a command line that ends by running its
// arguments: {"timeout", "60", "taskset", "-c", "0"} runs `timeout 60 taskset -c 0 minfer ARGS`.
CommandResult run_minfer_under(const std::vector<std::string>& wrapper,
                               const std::vector<std::string>& args,
                               const std::string& stdin_text = "");

// A fresh, empty temporary directory that is removed when the object dies.
class TempDir {
  public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

  private:
    std::filesystem::path path_;
};

}  // namespace minfer::test

// Declares `var` as the fixture's path; if the fixture is missing, the test fails in CI and is
// skipped (with the reason) elsewhere.
#define MINFER_REQUIRE_FIXTURE(var, relative)                                               \
    const std::filesystem::path var = ::minfer::test::fixture_path(relative);               \
    if (!std::filesystem::exists(var)) {                                                    \
        if (::minfer::test::in_ci()) {                                                      \
            FAIL() << "fixture missing in CI: " << var;                                     \
        } else {                                                                            \
            GTEST_SKIP() << "fixture missing (is ../shared beside the checkout?): " << var; \
        }                                                                                   \
    }
