#include "core/cpu_set.h"

#include <sched.h>

#include <algorithm>
#include <thread>

#include "core/error.h"
#include "core/log.h"

namespace minfer {
namespace {

// The CPUs the outermost CallerPin of this thread found before pinning; valid while
// pin_depth > 0.
thread_local int pin_depth = 0;
thread_local std::vector<int> cpus_before_pin;

// Pinning is a hint: a failure (restricted container, CPU gone offline) leaves the thread as is.
void set_calling_thread_cpus(const std::vector<int>& cpus) {
    if (cpus.empty()) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus) CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

}  // namespace

std::vector<int> thread_cpus() {
    std::vector<int> cpus;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
        }
    }
    return cpus;
}

std::vector<int> usable_cpus() {
    return pin_depth > 0 ? cpus_before_pin : thread_cpus();
}

int usable_cpu_count() {
    const auto n = static_cast<int>(usable_cpus().size());
    const int count = n > 0 ? n : static_cast<int>(std::thread::hardware_concurrency());
    return std::clamp(count, 1, kMaxThreads);
}

std::string cpus_available_text(int n_cpus) {
    return n_cpus == 1 ? "only 1 CPU is available to this process"
                       : concat("only ", n_cpus, " CPUs are available to this process");
}

int clamp_thread_count(int requested, std::string_view flag_name) {
    if (requested < 0) {
        throw UsageError(concat(flag_name, " ", requested, ": the thread count must be 0 (one per ",
                                "CPU) or more"));
    }
    const int n_cpus = usable_cpu_count();
    if (requested == 0) return n_cpus;
    if (requested <= n_cpus) return requested;
    log_warning(concat(flag_name, " ", requested, ": ", cpus_available_text(n_cpus), "; using ",
                       n_cpus, n_cpus == 1 ? " thread" : " threads"));
    return n_cpus;
}

CallerPin::CallerPin(int cpu) : previous_(thread_cpus()) {
    if (pin_depth++ == 0) cpus_before_pin = previous_;
    set_calling_thread_cpus({cpu});
}

CallerPin::~CallerPin() {
    set_calling_thread_cpus(previous_);
    if (--pin_depth == 0) cpus_before_pin.clear();
}

}  // namespace minfer
