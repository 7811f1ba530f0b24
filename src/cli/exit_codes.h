#pragma once
// The exit status of `minfer`, one meaning each (the README has the table):
//   0    success
//   1    a runtime error: a file that cannot be read or written, a bad model, a prompt that does
//        not fit, not enough memory, a write error on standard output
//   2    a usage error: an unknown flag, a bad or contradictory value on the command line
//   130  interrupted by Ctrl-C (128 + SIGINT, as shells report it)

namespace minfer::cli {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitRuntimeError = 1;
inline constexpr int kExitUsageError = 2;
inline constexpr int kExitInterrupted = 130;

// Thrown by a command that stopped because of Ctrl-C after printing what it had: main checks the
// output like after a success and exits with kExitInterrupted.
struct InterruptedByUser {};

}  // namespace minfer::cli
