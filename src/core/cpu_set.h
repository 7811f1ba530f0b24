#pragma once
// The CPUs this process may run on, and thread counts clamped to them. A forward pass gains
// nothing from more threads than CPUs: its threads meet at a barrier after every op, so each op
// waits for whichever thread has no CPU at the moment (with spinning barriers, `-t 1000` on 2
// CPUs hung and `-t 2` under `taskset -c 0` ran ~100x slower than `-t 1`).

#include <string>
#include <string_view>
#include <vector>

namespace minfer {

// The most threads a pool may have (ThreadPool, InferenceContext).
inline constexpr int kMaxThreads = 1024;

// The CPUs the calling thread may run on (sched_getaffinity), in increasing order; empty when
// the OS does not say.
std::vector<int> thread_cpus();

// The CPUs the calling thread may use: thread_cpus(), except that while a CallerPin (a pinned
// ThreadPool) binds the thread to one CPU, the CPUs it had before. So a second context made
// while a first one's pool lives still sees every CPU.
std::vector<int> usable_cpus();

// The number of usable_cpus(), 1..kMaxThreads (std::thread::hardware_concurrency() when the
// affinity is unknown).
int usable_cpu_count();

// The thread count to use when `requested` threads are asked for: 0 means one per usable CPU;
// more than usable_cpu_count() is clamped to it with a warning (log_warning) that names
// `flag_name`: "-t 1000: only 2 CPUs are available to this process; using 2 threads". Throws
// UsageError for a negative count.
int clamp_thread_count(int requested, std::string_view flag_name);

// "only 2 CPUs are available to this process" (or "only 1 CPU is ..."), for messages.
std::string cpus_available_text(int n_cpus);

// Binds the calling thread to one CPU while it lives (pinning is a hint: where the OS refuses,
// the thread stays as it was), then gives the thread its previous CPUs back. Construct and
// destroy on the same thread; nested pins end in reverse order.
class CallerPin {
  public:
    explicit CallerPin(int cpu);
    ~CallerPin();
    CallerPin(const CallerPin&) = delete;
    CallerPin& operator=(const CallerPin&) = delete;

  private:
    std::vector<int> previous_;  // thread_cpus() before pinning
};

}  // namespace minfer
