#pragma once
// Work items [0, count) shared out among the threads of one ThreadPool::run, balanced as they go.
//
// Why: a static split gives each thread the same bytes, but the two vCPUs of the development VM
// do not run at the same speed from one moment to the next (the host's other tenants). Measured
// on Qwen2 0.5B and Llama 1.1B decoding with 2 threads, the faster thread waited at the barrier
// after each matmul for 5-28 % of the whole decode time. Here each thread starts on its own
// contiguous share (so its reads stay one sequential stream), takes it from the front a chunk at a
// time, and once it is done takes half of what remains of the largest other share, from its back.
// Every item is still processed exactly once, by one thread, so results do not depend on who
// took it.

#include <atomic>
#include <cstdint>
#include <memory>

namespace minfer {

class WorkRanges {
  public:
    // count < 2^32 items, n_threads >= 1; thread i's share is [count * i / n, count * (i + 1) / n).
    WorkRanges(int64_t count, int n_threads);

    // Every share back to its start, for another run over the same items (not during a run).
    void reset();

    // Called by every thread i of the n_threads: calls fn(begin, end) on pieces of the work until
    // none is left anywhere. Pieces of thread i's own share hold up to `chunk` items (>= 1) and
    // come in order. (A thread index past n_threads only takes from the others: every item is
    // still processed once, whatever the pool.)
    template <class F>
    void run(int thread, int64_t chunk, F&& fn) {
        int64_t begin = 0, end = 0;
        if (thread < n_threads_) {
            while (take_front(thread, chunk, begin, end)) fn(begin, end);
        }
        while (steal(thread, begin, end)) fn(begin, end);
    }

  private:
    // A share as one word, so that the owner (front) and a thief (back) update it atomically:
    // begin in the low 32 bits, end in the high 32. On its own cache line.
    struct alignas(64) Share {
        std::atomic<uint64_t> range;
    };
    static uint64_t pack(int64_t begin, int64_t end) {
        return static_cast<uint64_t>(begin) | static_cast<uint64_t>(end) << 32;
    }
    static int64_t begin_of(uint64_t word) { return static_cast<int64_t>(word & 0xFFFFFFFFu); }
    static int64_t end_of(uint64_t word) { return static_cast<int64_t>(word >> 32); }

    static std::unique_ptr<Share[]> make_shares(int64_t count, int n_threads);  // validated
    bool take_front(int thread, int64_t chunk, int64_t& begin, int64_t& end);
    bool steal(int thread, int64_t& begin, int64_t& end);

    int64_t count_;
    int n_threads_;
    std::unique_ptr<Share[]> shares_;
};

}  // namespace minfer
