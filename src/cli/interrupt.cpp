#include "cli/interrupt.h"

#include <signal.h>
#include <unistd.h>

namespace minfer::cli {
namespace {

std::atomic<bool> g_interrupted{false};
struct sigaction g_previous {};

extern "C" void on_sigint(int) {
    if (g_interrupted.exchange(true)) _exit(130);  // second Ctrl-C: give up at once
}

}  // namespace

InterruptGuard::InterruptGuard() {
    struct sigaction action {};
    action.sa_handler = on_sigint;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &g_previous);
}

InterruptGuard::~InterruptGuard() {
    sigaction(SIGINT, &g_previous, nullptr);
}

const std::atomic<bool>& InterruptGuard::flag() {
    return g_interrupted;
}
void InterruptGuard::clear() {
    g_interrupted.store(false);
}

}  // namespace minfer::cli
