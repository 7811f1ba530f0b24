#include "core/work_ranges.h"

#include <algorithm>

#include "core/error.h"

namespace minfer {

std::unique_ptr<WorkRanges::Share[]> WorkRanges::make_shares(int64_t count, int n_threads) {
    if (count < 0 || count >= (int64_t{1} << 32) || n_threads < 1) {
        throw UsageError(
            concat("cannot share ", count, " work items among ", n_threads, " threads"));
    }
    return std::make_unique<Share[]>(static_cast<std::size_t>(n_threads));
}

WorkRanges::WorkRanges(int64_t count, int n_threads)
    : count_(count), n_threads_(n_threads), shares_(make_shares(count, n_threads)) {
    reset();
}

void WorkRanges::reset() {
    for (int i = 0; i < n_threads_; ++i) {
        const int64_t begin = count_ * i / n_threads_, end = count_ * (i + 1) / n_threads_;
        shares_[static_cast<std::size_t>(i)].range.store(pack(begin, end),
                                                         std::memory_order_relaxed);
    }
}

bool WorkRanges::take_front(int thread, int64_t chunk, int64_t& begin, int64_t& end) {
    std::atomic<uint64_t>& range = shares_[static_cast<std::size_t>(thread)].range;
    uint64_t word = range.load(std::memory_order_relaxed);
    for (;;) {
        const int64_t b = begin_of(word), e = end_of(word);
        if (b >= e) return false;
        const int64_t taken = std::min(std::max<int64_t>(chunk, 1), e - b);
        // Relaxed: the items' data was written before the pool's run started (or its barrier).
        if (range.compare_exchange_weak(word, pack(b + taken, e), std::memory_order_relaxed)) {
            begin = b;
            end = b + taken;
            return true;
        }
    }
}

bool WorkRanges::steal(int thread, int64_t& begin, int64_t& end) {
    for (;;) {
        // The other share with the most left.
        int victim = -1;
        uint64_t word = 0;
        int64_t most = 0;
        for (int k = 1; k <= n_threads_; ++k) {
            const int v = (thread + k) % n_threads_;
            if (v == thread) continue;
            const uint64_t w =
                shares_[static_cast<std::size_t>(v)].range.load(std::memory_order_relaxed);
            const int64_t left = end_of(w) - begin_of(w);
            if (left > most) {
                most = left;
                victim = v;
                word = w;
            }
        }
        if (victim < 0) return false;
        const int64_t b = begin_of(word), e = end_of(word);
        const int64_t taken = (e - b + 1) / 2;  // half, rounded up: one item left is taken
        std::atomic<uint64_t>& range = shares_[static_cast<std::size_t>(victim)].range;
        if (range.compare_exchange_weak(word, pack(b, e - taken), std::memory_order_relaxed)) {
            begin = e - taken;
            end = e;
            return true;
        }
        // The owner or another thief moved first: look again.
    }
}

}  // namespace minfer
