#pragma once
// A barrier for the threads of one ThreadPool::run: every thread calls arrive_and_wait() and none
// returns before all have arrived. It spins (the wait between two ops of a forward pass is a few
// microseconds), then yields, so an oversubscribed machine still makes progress.

#include <atomic>
#include <cstdint>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace minfer {

class SpinBarrier {
  public:
    explicit SpinBarrier(int n_threads) : n_threads_(n_threads) {}

    void arrive_and_wait() {
        if (n_threads_ == 1) return;
        const uint32_t generation = generation_.load(std::memory_order_acquire);
        if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_threads_) {
            arrived_.store(0, std::memory_order_relaxed);
            generation_.store(generation + 1, std::memory_order_release);
            return;
        }
        for (int spins = 0; generation_.load(std::memory_order_acquire) == generation; ++spins) {
            if (spins < kSpinsBeforeYield) {
                pause();
            } else {
                std::this_thread::yield();
            }
        }
    }

  private:
    static constexpr int kSpinsBeforeYield = 1 << 14;
    static void pause() {
#if defined(__x86_64__) || defined(__i386__)
        _mm_pause();
#endif
    }

    const int n_threads_;
    std::atomic<int> arrived_{0};
    std::atomic<uint32_t> generation_{0};
};

}  // namespace minfer
