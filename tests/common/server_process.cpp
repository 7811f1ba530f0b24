#include "common/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "core/file_io.h"

namespace minfer::test {
namespace {

using Clock = std::chrono::steady_clock;

int status_of(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

ServerProcess::ServerProcess(const std::string& model, const std::vector<std::string>& args) {
    std::vector<std::string> argv_storage = {MINFER_BINARY, "serve", model, "--port", "0"};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string err = (dir_ / "stderr").string();
    std::ofstream{err};  // there before the child writes, for log() to read at once
    pid_ = ::fork();
    if (pid_ == 0) {
        const int null_fd = ::open("/dev/null", O_RDWR);
        const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (null_fd < 0 || err_fd < 0) ::_exit(126);
        ::dup2(null_fd, 0);
        ::dup2(null_fd, 1);
        ::dup2(err_fd, 2);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    if (pid_ < 0) return;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (Clock::now() < deadline) {
        const std::string text = log();
        const auto listening = text.find("listening on ");
        if (listening != std::string::npos && text.find("minfer: serving") != std::string::npos) {
            const auto begin = listening + std::string("listening on ").size();
            url_ = text.substr(begin, text.find(',', begin) - begin);
            return;
        }
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

ServerProcess::~ServerProcess() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

std::string ServerProcess::log() const {
    return read_file(dir_ / "stderr");
}

int ServerProcess::stop(int signal) {
    if (pid_ <= 0) return -1;
    ::kill(pid_, signal);
    int status = 0;
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    while (::waitpid(pid_, &status, WNOHANG) != pid_) {
        if (Clock::now() >= deadline) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    return status_of(status);
}

}  // namespace minfer::test
