#pragma once
// `minfer serve MODEL --port 0 ARGS...` running beside a test (for bench-serve, and for how the
// server starts and stops): the constructor waits until it serves, the destructor stops it.

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/fixtures.h"

namespace minfer::test {

class ServerProcess {
  public:
    ServerProcess(const std::string& model, const std::vector<std::string>& args);
    ~ServerProcess();  // SIGKILL if still running
    ServerProcess(const ServerProcess&) = delete;
    ServerProcess& operator=(const ServerProcess&) = delete;

    // Whether it said "minfer: serving" within 30 s (false: it exited or hung; see log()).
    bool serving() const { return !url_.empty(); }
    const std::string& url() const { return url_; }  // "http://127.0.0.1:PORT"
    std::string log() const;                         // its stderr so far

    // Sends `signal`, waits up to 30 s (then SIGKILL) and returns the exit status (128 + signal
    // when killed by one).
    int stop(int signal);

  private:
    TempDir dir_;
    pid_t pid_ = -1;
    std::string url_;
};

}  // namespace minfer::test
