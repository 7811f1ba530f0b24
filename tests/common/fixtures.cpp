#include "fixtures.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "core/file_io.h"

namespace minfer::test {

std::filesystem::path shared_dir() {
    if (const char* env = std::getenv("MINFER_SHARED")) return env;
    return MINFER_SHARED_DIR;
}

std::filesystem::path fixture_path(const std::string& relative) {
    return shared_dir() / "fixtures" / relative;
}

bool in_ci() {
    const char* ci = std::getenv("CI");
    if (ci == nullptr) return false;
    const std::string v = ci;
    return !v.empty() && v != "0" && v != "false";
}

namespace {

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

}  // namespace

CommandResult run_minfer(const std::vector<std::string>& args, const std::string& stdin_text,
                         const std::vector<std::pair<std::string, std::string>>& env) {
    TempDir dir;
    const auto in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
    std::ofstream(in, std::ios::binary) << stdin_text;
    std::string cmd;
    for (const auto& [name, value] : env) cmd += name + "=" + shell_quote(value) + " ";
    cmd += shell_quote(MINFER_BINARY);
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " <" + shell_quote(in.string()) + " >" + shell_quote(out.string()) + " 2>" +
           shell_quote(err.string());
    const int status = std::system(cmd.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

CommandResult run_minfer_under(const std::vector<std::string>& wrapper,
                               const std::vector<std::string>& args,
                               const std::string& stdin_text) {
    TempDir dir;
    const auto in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
    std::ofstream(in, std::ios::binary) << stdin_text;
    std::string cmd;
    for (const auto& w : wrapper) cmd += shell_quote(w) + " ";
    cmd += shell_quote(MINFER_BINARY);
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " <" + shell_quote(in.string()) + " >" + shell_quote(out.string()) + " 2>" +
           shell_quote(err.string());
    const int status = std::system(cmd.c_str());
    CommandResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

TempDir::TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("minfer-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
}

}  // namespace minfer::test
