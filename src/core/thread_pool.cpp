#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <chrono>

#include "core/cpu_set.h"
#include "core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace minfer {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}

int64_t now_micros() {
    using namespace std::chrono;
    return duration_cast<microseconds>(steady_clock::now().time_since_epoch()).count();
}

// Pinning is a hint: a failure (restricted container) leaves the thread unpinned.
void set_thread_cpus(pthread_t thread, const std::vector<int>& cpus) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu : cpus) CPU_SET(cpu, &set);
    pthread_setaffinity_np(thread, sizeof(set), &set);
}

// Waits until `done()` holds: spins for spin_micros, then yields until yield_micros, then calls
// `sleep()`, which blocks and returns whether done() holds.
template <class Done, class Sleep>
void wait_until(Done done, int64_t spin_micros, int64_t yield_micros, Sleep sleep) {
    const int64_t start = now_micros();
    for (uint32_t i = 1;; ++i) {
        if (done()) return;
        cpu_relax();
        if ((i & 63) != 0) continue;
        const int64_t waited = now_micros() - start;
        if (waited < spin_micros) continue;
        if (waited < yield_micros) {
            std::this_thread::yield();
        } else if (sleep()) {
            return;
        }
    }
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, bool pin_threads) : n_threads_(n_threads) {
    if (n_threads < 1 || n_threads > kMaxThreads) {
        throw UsageError(
            concat("thread count must be between 1 and ", kMaxThreads, ", got ", n_threads));
    }
    workers_.reserve(static_cast<size_t>(n_threads - 1));
    for (int i = 1; i < n_threads; ++i) {
        workers_.emplace_back([this, i] { worker_loop(i); });
    }
    // Workers inherit the caller's affinity, which another pinned pool may have narrowed to one
    // CPU; they get the caller's usable CPUs instead.
    const std::vector<int> cpus = usable_cpus();
    if (cpus.empty()) return;
    if (pin_threads) {
        for (int i = 1; i < n_threads; ++i) {
            set_thread_cpus(workers_[static_cast<size_t>(i - 1)].native_handle(),
                            {cpus[static_cast<size_t>(i) % cpus.size()]});
        }
        caller_pin_.emplace(cpus[0]);
    } else if (cpus != thread_cpus()) {
        for (std::thread& worker : workers_) set_thread_cpus(worker.native_handle(), cpus);
    }
}

ThreadPool::~ThreadPool() {
    stop_.store(true, std::memory_order_seq_cst);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    generation_.notify_all();
    for (std::thread& worker : workers_) worker.join();
}

void ThreadPool::record_exception() {
    std::lock_guard<std::mutex> lock(exception_mutex_);
    if (!first_exception_) first_exception_ = std::current_exception();
}

void ThreadPool::run(const Task& fn) {
    // Another thread's run (a second engine sharing the pool) is waited for; a run from inside
    // fn on this thread would wait for itself, so it is refused.
    if (runner_.load(std::memory_order_acquire) == std::this_thread::get_id()) {
        throw UsageError("ThreadPool::run called while the pool is already running a task");
    }
    const std::lock_guard<FairMutex> one_run_at_a_time(run_mutex_);
    runner_.store(std::this_thread::get_id(), std::memory_order_release);
    first_exception_ = nullptr;
    if (n_threads_ > 1) {
        task_ = &fn;
        pending_.store(n_threads_ - 1, std::memory_order_relaxed);
        // seq_cst pairs with the worker's sleepers_ increment: either we see it and notify, or
        // its wait() sees the new generation and does not block.
        generation_.fetch_add(1, std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
    }
    try {
        fn(0, n_threads_);
    } catch (...) {
        record_exception();
    }
    if (n_threads_ > 1) {
        // Workers finish within microseconds of us, unless one has lost its CPU. seq_cst pairs
        // with the last worker's pending_ decrement: either it sees caller_sleeping_ and
        // notifies, or our load sees 0.
        wait_until([this] { return pending_.load(std::memory_order_acquire) == 0; }, kSpinMicros,
                   kCallerYieldMicros,
                   [this] {
                       caller_sleeping_.store(true, std::memory_order_seq_cst);
                       for (int p; (p = pending_.load(std::memory_order_seq_cst)) != 0;) {
                           pending_.wait(p, std::memory_order_seq_cst);
                       }
                       caller_sleeping_.store(false, std::memory_order_relaxed);
                       return true;
                   });
        task_ = nullptr;
    }
    runner_.store(std::thread::id(), std::memory_order_release);
    if (first_exception_) std::rethrow_exception(first_exception_);
}

void ThreadPool::worker_loop(int thread_index) {
    // Generation 0 is the pool's state at construction; a run may already have started before
    // this thread got scheduled, so never read the starting point from generation_.
    uint32_t seen = 0;
    for (;;) {
        wait_until([&] { return generation_.load(std::memory_order_acquire) != seen; }, kSpinMicros,
                   kYieldMicros,
                   [&] {
                       sleepers_.fetch_add(1, std::memory_order_seq_cst);
                       generation_.wait(seen, std::memory_order_seq_cst);
                       sleepers_.fetch_sub(1, std::memory_order_seq_cst);
                       return generation_.load(std::memory_order_acquire) != seen;
                   });
        seen = generation_.load(std::memory_order_acquire);
        if (stop_.load(std::memory_order_acquire)) return;
        try {
            (*task_)(thread_index, n_threads_);
        } catch (...) {
            record_exception();
        }
        // The pool outlives this access: its destructor joins this thread first.
        if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
            caller_sleeping_.load(std::memory_order_seq_cst)) {
            pending_.notify_one();
        }
    }
}

std::shared_ptr<ThreadPool> shared_thread_pool(int n_threads, bool pin_threads) {
    static std::mutex mutex;
    static std::weak_ptr<ThreadPool> shared;
    static std::pair<int, bool> config;
    const std::lock_guard<std::mutex> lock(mutex);
    if (auto pool = shared.lock(); pool && config == std::pair{n_threads, pin_threads}) return pool;
    auto pool = std::make_shared<ThreadPool>(n_threads, pin_threads);
    shared = pool;
    config = {n_threads, pin_threads};
    return pool;
}

}  // namespace minfer
