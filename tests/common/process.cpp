#include "common/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <thread>

#include "core/file_io.h"

namespace minfer::test {

CommandResult run_minfer_process(const std::vector<std::string>& args,
                                 const ProcessOptions& options) {
    TempDir dir;
    const auto in = dir / "stdin", out = dir / "stdout", err = dir / "stderr";
    std::ofstream(in, std::ios::binary) << options.stdin_text;
    std::ofstream{err};  // there before the child writes (interrupt_when_stderr_has reads it)
    int pipe_fds[2] = {-1, -1};
    if (options.stdout_closed_pipe && ::pipe(pipe_fds) != 0) return {};

    std::vector<std::string> argv_storage = {options.binary};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_storage) argv.push_back(a.data());
    argv.push_back(nullptr);

    // Everything the child needs is computed before fork (no allocation between fork and exec).
    const std::string stdout_target = options.stdout_path.value_or(out.string());
    const std::string stdin_source = options.stdin_path.value_or(in.string());
    const pid_t pid = ::fork();
    if (pid == 0) {
        const auto redirect = [](const char* path, int flags, int target) {
            const int fd = ::open(path, flags, 0644);
            if (fd < 0 || ::dup2(fd, target) < 0) ::_exit(126);
            ::close(fd);
        };
        redirect(stdin_source.c_str(), O_RDONLY, 0);
        redirect(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 2);
        if (options.stdout_closed_pipe) {
            ::signal(SIGPIPE, SIG_IGN);
            ::dup2(pipe_fds[1], 1);
            ::close(pipe_fds[0]);
            ::close(pipe_fds[1]);
        } else {
            redirect(stdout_target.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 1);
        }
        if (options.address_space_limit) {
            const struct rlimit limit = {*options.address_space_limit,
                                         *options.address_space_limit};
            ::setrlimit(RLIMIT_AS, &limit);
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    if (options.stdout_closed_pipe) {
        // Nobody will ever read: the child's writes fail with EPIPE.
        ::close(pipe_fds[0]);
        ::close(pipe_fds[1]);
    }
    CommandResult r;
    if (pid < 0) return r;
    const auto start = std::chrono::steady_clock::now();
    bool interrupted = false;
    int status = 0;
    for (;;) {
        const pid_t done = ::waitpid(pid, &status, WNOHANG);
        if (done == pid) break;
        const auto elapsed = std::chrono::steady_clock::now() - start;
        const bool said =
            options.interrupt_when_stderr_has &&
            read_file(err).find(*options.interrupt_when_stderr_has) != std::string::npos;
        if ((said || (options.interrupt_after && elapsed >= *options.interrupt_after)) &&
            !interrupted) {
            ::kill(pid, SIGINT);
            interrupted = true;
        }
        if (elapsed >= options.timeout) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            r.err = "(killed after the test's timeout)\n";
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!options.stdout_path && !options.stdout_closed_pipe) r.out = read_file(out);
    r.err = read_file(err) + r.err;
    return r;
}

}  // namespace minfer::test
