#pragma once
// A persistent pool of worker threads for the kernels. `run(fn)` calls fn(thread_index,
// n_threads) on every thread of the pool (the caller is thread 0) and returns when all calls
// have returned. Decoding runs hundreds of matmuls per token, each a few tens of microseconds,
// so dispatch must cost about a microsecond: idle workers spin on an atomic generation counter
// for a while, then yield, then sleep on a futex (std::atomic::wait) so an idle pool burns no CPU.
// The caller's wait for the workers spins, yields, then sleeps on a futex too, like SpinBarrier
// (see there why the yielding lasts milliseconds).

#include <atomic>
#include <memory>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/cpu_set.h"
#include "core/fair_mutex.h"

namespace minfer {

class ThreadPool {
  public:
    using Task = std::function<void(int thread_index, int n_threads)>;

    // n_threads >= 1 (the caller counts as one); throws UsageError otherwise or above
    // kMaxThreads. More threads than CPUs work, only slower (callers clamp: clamp_thread_count).
    // pin_threads binds worker i (and the calling thread, as thread 0) to the i-th of the
    // caller's usable_cpus(), round robin; the destructor gives the caller its CPUs back.
    // Construct and destroy on the same thread.
    explicit ThreadPool(int n_threads, bool pin_threads = false);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return n_threads_; }

    // Runs fn on all threads and waits for all of them. If some calls throw, the first exception
    // is rethrown here after every thread has finished. Runs from several threads take turns in
    // the order they came (two engines sharing the pool alternate);
    // fn must not call run on the same pool (it throws UsageError).
    void run(const Task& fn);

    // How long an idle worker spins before yielding, and yields before sleeping (microseconds).
    // Spinning stays short because an unpinned worker may share a CPU with the caller (seen on
    // the 2-vCPU development sandbox): there, every microsecond of spinning is taken from the
    // thread being waited for. Pinning avoids that.
    static constexpr int64_t kSpinMicros = 20;
    static constexpr int64_t kYieldMicros = 2000;
    // The caller waiting for busy workers spins kSpinMicros, then yields until this, then sleeps:
    // a worker that lost its CPU to another process is typically back within a few ms, and a
    // sleeping caller would itself wait for a time slice to be woken.
    static constexpr int64_t kCallerYieldMicros = 10000;

  private:
    void worker_loop(int thread_index);
    void record_exception();

    int n_threads_;
    std::vector<std::thread> workers_;
    std::optional<CallerPin> caller_pin_;  // set when pinned

    const Task* task_ = nullptr;                // valid while a run is in flight
    std::atomic<uint32_t> generation_{0};       // bumped once per run (and at shutdown)
    std::atomic<int> pending_{0};               // workers still running the current task
    std::atomic<int> sleepers_{0};              // workers blocked in generation_.wait()
    std::atomic<bool> caller_sleeping_{false};  // the caller is blocked in pending_.wait()
    std::atomic<bool> stop_{false};
    // One run at a time, in the order they came: engines sharing the pool take turns.
    FairMutex run_mutex_;
    std::atomic<std::thread::id> runner_{};  // the thread inside run(), if any

    std::mutex exception_mutex_;
    std::exception_ptr first_exception_;
};

// The process's pool: every engine of a process shares one, so that two engines do not pin their
// threads onto the same CPUs. Returns the live pool made with the same arguments, else a new one
// (which then becomes the shared one). The last owner destroys it; construct and drop it on one
// thread when pinned (see CallerPin).
std::shared_ptr<ThreadPool> shared_thread_pool(int n_threads, bool pin_threads);

}  // namespace minfer
