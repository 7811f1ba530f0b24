#pragma once
// Ctrl-C during generation: the first press stops the answer (the command prints what it has and
// its timings); a second press while still stopping exits at once.

#include <atomic>

namespace minfer::cli {

class InterruptGuard {
  public:
    InterruptGuard();   // installs the SIGINT handler
    ~InterruptGuard();  // restores the previous one
    InterruptGuard(const InterruptGuard&) = delete;
    InterruptGuard& operator=(const InterruptGuard&) = delete;

    // Set by Ctrl-C; clear() before each answer.
    static const std::atomic<bool>& flag();
    static void clear();
};

}  // namespace minfer::cli
