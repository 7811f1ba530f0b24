// Highway implementations of machine_limits.h; compiled once per SIMD target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/machine_limits.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <chrono>

#include "core/huge_page_memory.h"
#include "core/work_ranges.h"
#include "kernels/machine_limits.h"

HWY_BEFORE_NAMESPACE();
namespace minfer {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Sums n floats with four independent accumulators so loads, not adds, limit the speed.
float SumFloats(const float* p, int64_t n) {
    const hn::ScalableTag<float> d;
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
    auto a = hn::Zero(d), b = hn::Zero(d), c = hn::Zero(d), e = hn::Zero(d);
    int64_t i = 0;
    for (; i + 4 * lanes <= n; i += 4 * lanes) {
        a = hn::Add(a, hn::LoadU(d, p + i));
        b = hn::Add(b, hn::LoadU(d, p + i + lanes));
        c = hn::Add(c, hn::LoadU(d, p + i + 2 * lanes));
        e = hn::Add(e, hn::LoadU(d, p + i + 3 * lanes));
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(a, b), hn::Add(c, e))));
    for (; i < n; ++i) sum += p[i];
    return sum;
}

// Runs `iterations` rounds of 8 independent FMA chains; returns the flops done.
double FmaBurst(int64_t iterations, float seed) {
    const hn::ScalableTag<float> d;
    auto x = hn::Set(d, 1.0f), m = hn::Set(d, 0.999999f), s = hn::Set(d, seed);
    auto a0 = x, a1 = x, a2 = x, a3 = x, a4 = x, a5 = x, a6 = x, a7 = x;
    for (int64_t i = 0; i < iterations; ++i) {
        a0 = hn::MulAdd(a0, m, s);
        a1 = hn::MulAdd(a1, m, s);
        a2 = hn::MulAdd(a2, m, s);
        a3 = hn::MulAdd(a3, m, s);
        a4 = hn::MulAdd(a4, m, s);
        a5 = hn::MulAdd(a5, m, s);
        a6 = hn::MulAdd(a6, m, s);
        a7 = hn::MulAdd(a7, m, s);
    }
    const auto total = hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)),
                               hn::Add(hn::Add(a4, a5), hn::Add(a6, a7)));
    // Keep the result alive so the loop is not optimised away.
    volatile float sink = hn::GetLane(total);
    (void)sink;
    return static_cast<double>(iterations) * 8.0 * 2.0 * static_cast<double>(hn::Lanes(d));
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer {
HWY_EXPORT(SumFloats);
HWY_EXPORT(FmaBurst);

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, std::size_t bytes)
    : pool_(pool), memory_(bytes) {
    // Each thread first-touches the part it reads (written once: the pages are resident).
    auto* buffer = reinterpret_cast<float*>(memory_.data());
    const auto n = static_cast<int64_t>(memory_.size() / sizeof(float));
    pool_.run([&](int thread, int n_threads) {
        const int64_t begin = n * thread / n_threads, end = n * (thread + 1) / n_threads;
        std::fill(buffer + begin, buffer + end, 1.0f);
    });
}

ReadBandwidthProbe::~ReadBandwidthProbe() = default;

double ReadBandwidthProbe::read(std::size_t begin, std::size_t bytes) {
    const auto* buffer = reinterpret_cast<const float*>(memory_.data() + begin);
    // Pieces of 256 KiB shared out as the decode's matmuls share their rows (core/work_ranges.h):
    // the vCPUs do not read at the same rate from one moment to the next, and a fixed half each
    // would measure twice the slower one.
    constexpr int64_t kPieceFloats = (int64_t{256} << 10) / sizeof(float);
    const auto n = static_cast<int64_t>(bytes / sizeof(float));
    WorkRanges pieces((n + kPieceFloats - 1) / kPieceFloats, pool_.size());
    std::atomic<float> sink{0.0f};
    const auto start = std::chrono::steady_clock::now();
    pool_.run([&](int thread, int) {
        float s = 0.0f;
        pieces.run(thread, 1, [&](int64_t p0, int64_t p1) {
            const int64_t from = p0 * kPieceFloats, to = std::min(n, p1 * kPieceFloats);
            s += HWY_DYNAMIC_DISPATCH(SumFloats)(buffer + from, to - from);
        });
        sink.store(s, std::memory_order_relaxed);
    });
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    return static_cast<double>(bytes) / took.count();
}

double ReadBandwidthProbe::measure(int passes) {
    double best = 0;
    for (int pass = 0; pass < passes; ++pass) best = std::max(best, read(0, memory_.size()));
    return best;
}

double ReadBandwidthProbe::measure_slice(std::size_t bytes) {
    bytes = std::min(bytes, memory_.size()) / 64 * 64;
    if (next_slice_ + bytes > memory_.size()) next_slice_ = 0;
    const double rate = read(next_slice_, bytes);
    next_slice_ += bytes;
    return rate;
}

double measure_peak_fma_flops(ThreadPool& pool) {
    constexpr int64_t kIterations = 20'000'000;
    std::atomic<double> flops{0.0};
    const auto start = std::chrono::steady_clock::now();
    pool.run([&](int thread, int) {
        const double f =
            HWY_DYNAMIC_DISPATCH(FmaBurst)(kIterations, 1e-7f * static_cast<float>(thread + 1));
        double expected = flops.load();
        while (!flops.compare_exchange_weak(expected, expected + f)) {
        }
    });
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    return flops.load() / took.count();
}

}  // namespace minfer
#endif
