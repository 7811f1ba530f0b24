#pragma once
// Running the minfer binary the way hostile environments do: stdout on a full device or a pipe
// nobody reads, under a memory limit, interrupted by SIGINT after a while.

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/fixtures.h"

namespace minfer::test {

struct ProcessOptions {
    std::string binary = MINFER_BINARY;  // or MINFER_MAKE_MODEL_BINARY
    std::string stdin_text;
    // stdin comes from this path (e.g. "/dev/zero", a directory) instead of stdin_text.
    std::optional<std::string> stdin_path;
    // stdout goes to this file (e.g. "/dev/full") instead of being captured.
    std::optional<std::string> stdout_path;
    // stdout is a pipe whose read end is closed before the child starts, with SIGPIPE ignored
    // in the child (the case where a write fails with EPIPE rather than killing the process).
    bool stdout_closed_pipe = false;
    std::optional<unsigned long long> address_space_limit;     // RLIMIT_AS in bytes
    std::optional<std::chrono::milliseconds> interrupt_after;  // SIGINT once, after this long
    // SIGINT once, as soon as stderr holds this text (a server saying that it serves).
    std::optional<std::string> interrupt_when_stderr_has;
    std::chrono::seconds timeout{120};  // SIGKILL after this (a hang fails the test, never blocks)
};

// Runs options.binary with args; exit_code is 128 + signal when killed by one.
CommandResult run_minfer_process(const std::vector<std::string>& args,
                                 const ProcessOptions& options);

}  // namespace minfer::test
