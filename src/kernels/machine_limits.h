#pragma once
// The physical limits benchmarks compare against, measured on the machine at hand: the memory
// read bandwidth (a buffer much larger than the caches, read with SIMD loads on n threads) and the
// peak f32 FMA rate.

#include <cstdint>

#include "core/thread_pool.h"

namespace minfer {

// Bytes per second reading `bytes` (default 512 MiB) once per pass, best of `passes`.
double measure_read_bandwidth(ThreadPool& pool, std::size_t bytes = std::size_t{512} << 20,
                              int passes = 5);

// f32 floating-point operations per second (an FMA counts as two) on every thread of the pool.
double measure_peak_fma_flops(ThreadPool& pool);

}  // namespace minfer
