#pragma once
// A barrier for the threads of one ThreadPool::run: every thread calls arrive_and_wait() and none
// returns before all have arrived. A forward pass crosses one after most ops, hundreds per decoded
// token, so crossing must cost about a microsecond when every thread has a CPU.
//
// Design: a waiting thread spins on the generation counter, then yields, then sleeps on a futex
// (std::atomic::wait). Measured on the 2-vCPU sandbox (Linux 6.18, EEVDF):
// - Spin, for a per-thread budget that adapts in [kMinSpinMicros, kMaxSpinMicros]: halved when
//   the spin runs out, doubled when it succeeds. The waits between ops are a few microseconds,
//   so with a CPU per thread every spin succeeds and the budget stays at the maximum. With our
//   threads queued on one CPU, spinning takes the CPU from the very thread being waited for:
//   spinning ~16k pauses per wait made `-t 2` under `taskset -c 0` ~150x slower than `-t 1`;
//   now no spin succeeds there and the budget falls to the minimum. The clock (~25 ns a read)
//   is read only after kPausesBeforeClock pauses, so short waits never read it.
// - Yield, until kYieldMicros after the spin began: the thread being waited for has lost its
//   CPU (to one of our threads, another process, a server's other threads). A yield hands our
//   CPU to whatever waits for it, yet keeps us runnable. Sleeping instead, after tens of
//   microseconds, collapsed decoding beside a busy process (3700 -> 600 tokens/s): a woken
//   thread waits for the busy one's time slice (milliseconds) to end, at every barrier, and
//   the awaited thread typically was away for 2-10 ms.
// - Sleep, once the wait has lasted kYieldMicros (a stopped or starved thread), on a futex:
//   an idle wait then burns no CPU. The count of arrived threads, a sleeper bit and the
//   generation share one atomic word, so the fast path is one fetch_add per thread and one
//   plain store by the last arriver, whose fetch_add also tells it whether to call notify_all
//   (a syscall). A separate sleeper count would need a seq_cst store and load on the fast path
//   (measured ~1% of decode speed).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace minfer {

class SpinBarrier {
  public:
    // A thread's spin budget: how long it spins before yielding (microseconds), adapted in
    // [kMinSpinMicros, kMaxSpinMicros]. A wait still unfinished kYieldMicros after its spin
    // began sleeps.
    static constexpr int64_t kMinSpinMicros = 1;
    static constexpr int64_t kMaxSpinMicros = 64;
    static constexpr int64_t kYieldMicros = 10000;

    // n_threads: 1..4095 (a ThreadPool has at most kMaxThreads = 1024).
    explicit SpinBarrier(int n_threads) : n_threads_(static_cast<uint32_t>(n_threads)) {}

    void arrive_and_wait() {
        if (n_threads_ == 1) return;
        const uint32_t before = state_.fetch_add(1, std::memory_order_acq_rel);
        const uint32_t generation = before >> kGenerationShift;
        if ((before & kCountMask) + 1 == n_threads_) {
            // The next generation, nobody arrived, nobody asleep.
            state_.store((generation + 1) << kGenerationShift, std::memory_order_release);
            if ((before & kSleeperBit) != 0) state_.notify_all();
            return;
        }
        int64_t& budget = spin_budget();
        Clock::time_point start;
        if (spin(generation, budget, start)) {
            if (budget < kMaxSpinMicros) budget *= 2;
            return;
        }
        if (budget > kMinSpinMicros) budget /= 2;
        if (!yield(generation, start)) sleep(generation);
    }

  private:
    using Clock = std::chrono::steady_clock;

    // state_: the generation (bits 13-31, wrapping), a sleeper bit, the threads arrived (bits
    // 0-11). One word, so that the last arriver's fetch_add both counts it and tells it whether
    // to wake sleepers, and its plain store both resets the count and opens the barrier.
    static constexpr uint32_t kCountMask = (1u << 12) - 1;
    static constexpr uint32_t kSleeperBit = 1u << 12;
    static constexpr int kGenerationShift = 13;

    // ~1-5 us of pauses (a pause is 10-140 cycles depending on the CPU) before the first clock
    // read; most waits end within it.
    static constexpr uint32_t kPausesBeforeClock = 64;

    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
    }

    static int64_t& spin_budget() {
        thread_local int64_t budget = kMaxSpinMicros;
        return budget;
    }

    bool passed(uint32_t generation) const {
        return (state_.load(std::memory_order_acquire) >> kGenerationShift) != generation;
    }

    // Spins while the barrier is at `generation`: true when it passed, false when budget_micros
    // after `start` (set on the first clock read) passed first.
    bool spin(uint32_t generation, int64_t budget_micros, Clock::time_point& start) const {
        for (uint32_t i = 1;; ++i) {
            if (passed(generation)) return true;
            pause();
            if (i % kPausesBeforeClock != 0) continue;
            if (i == kPausesBeforeClock) {
                start = Clock::now();
            } else if (Clock::now() - start > std::chrono::microseconds(budget_micros)) {
                return false;
            }
        }
    }

    // Yields while the barrier is at `generation`, until kYieldMicros after `start`; false when
    // that time passed first.
    bool yield(uint32_t generation, Clock::time_point start) const {
        while (Clock::now() - start < std::chrono::microseconds(kYieldMicros)) {
            std::this_thread::yield();
            if (passed(generation)) return true;
        }
        return false;
    }

    // Sets the sleeper bit and sleeps until the barrier passes. The bit is set by a
    // compare-exchange before the last arrival (so the last arriver's fetch_add sees it and
    // wakes us after its store), or not at all: once all have arrived, the store is imminent
    // and we only yield.
    void sleep(uint32_t generation) {
        uint32_t state = state_.load(std::memory_order_acquire);
        while ((state >> kGenerationShift) == generation) {
            if ((state & kCountMask) == n_threads_) {
                std::this_thread::yield();
                state = state_.load(std::memory_order_acquire);
            } else if ((state & kSleeperBit) != 0 ||
                       state_.compare_exchange_weak(state, state | kSleeperBit,
                                                    std::memory_order_acq_rel,
                                                    std::memory_order_acquire)) {
                state_.wait(state | kSleeperBit, std::memory_order_acquire);
                state = state_.load(std::memory_order_acquire);
            }
        }
    }

    const uint32_t n_threads_;
    std::atomic<uint32_t> state_{0};
};

}  // namespace minfer
