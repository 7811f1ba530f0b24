#pragma once
// The physical limits benchmarks compare against, measured on the machine at hand: the memory
// read bandwidth (a buffer much larger than the caches, in huge pages like the weights' copies,
// read with SIMD loads on n threads) and the peak f32 FMA rate.

#include <cstdint>

#include "core/huge_page_memory.h"
#include "core/thread_pool.h"

namespace minfer {

// A read buffer kept between measurements, so that the bandwidth can be measured again beside
// each repetition of a benchmark (this machine's bandwidth moves from minute to minute).
class ReadBandwidthProbe {
  public:
    // Maps and first-touches `bytes` (default 512 MiB) on the pool's threads.
    explicit ReadBandwidthProbe(ThreadPool& pool, std::size_t bytes = std::size_t{512} << 20);
    ~ReadBandwidthProbe();

    // Bytes per second reading the whole buffer once per pass, best of `passes`.
    double measure(int passes = 3);
    std::size_t bytes() const { return memory_.size(); }

  private:
    ThreadPool& pool_;
    HugePageMemory memory_;
};

// f32 floating-point operations per second (an FMA counts as two) on every thread of the pool.
double measure_peak_fma_flops(ThreadPool& pool);

}  // namespace minfer
