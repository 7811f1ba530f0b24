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
    // Bytes per second reading the next `bytes` of the buffer once (the slices go round the
    // buffer, so that one never finds the last in the caches): a short sample taken between
    // the steps of what it is compared with (up to the buffer's size).
    double measure_slice(std::size_t bytes);
    std::size_t bytes() const { return memory_.size(); }

  private:
    // Bytes per second of one read of [begin, begin + bytes) by the pool's threads.
    double read(std::size_t begin, std::size_t bytes);

    ThreadPool& pool_;
    HugePageMemory memory_;
    std::size_t next_slice_ = 0;  // byte offset of the next slice
};

// f32 floating-point operations per second (an FMA counts as two) on every thread of the pool.
double measure_peak_fma_flops(ThreadPool& pool);

// int8 operations per second (a multiply-add counts as two) on every thread of the pool, with the
// instruction minfer's integer GEMM panels use on this CPU: AVX512-VNNI's vpdpbusd, AVX2's
// vpmaddubsw/vpmaddwd/vpaddd, aarch64's sdot. The ceiling of a prompt's or a many-sequence step's
// products; 0 where the kernels have no such instruction (the scalar path, an older CPU).
double measure_peak_int8_ops(ThreadPool& pool);

}  // namespace minfer
