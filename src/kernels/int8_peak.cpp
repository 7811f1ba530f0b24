// measure_peak_int8_ops (machine_limits.h): independent chains of the instruction the integer
// GEMM panels multiply with, so that the figure is the ceiling those kernels can reach on this CPU
// and not a datasheet's. Written with intrinsics under function target attributes: Highway 1.0
// (Debian's) has no int8 dot product.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "kernels/kernel_path.h"
#include "kernels/machine_limits.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace minfer {
namespace {

// Ten chains: enough to cover the instructions' latency (4-5 cycles) on two ports.
#define MINFER_TEN_CHAINS(step) \
    step(a0) step(a1) step(a2) step(a3) step(a4) step(a5) step(a6) step(a7) step(a8) step(a9)

#if defined(__x86_64__)
// AVX512-VNNI: vpdpbusd multiplies 64 u8 x s8 pairs and adds them into 16 int32: 128 ops.
__attribute__((target("avx512f,avx512vnni"))) double vnni512_burst(int64_t iterations, int seed) {
    const __m512i u = _mm512_set1_epi8(static_cast<char>(seed | 1)), s = _mm512_set1_epi8(3);
    __m512i a0 = _mm512_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0;
#define MINFER_STEP(a) a = _mm512_dpbusd_epi32(a, u, s);
    for (int64_t i = 0; i < iterations; ++i) {
        MINFER_TEN_CHAINS(MINFER_STEP)
        __asm__ volatile("" : "+v"(a0), "+v"(a5));  // keep the loop from being folded
    }
#undef MINFER_STEP
    __m512i sum = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, a1), a2),
                                   _mm512_add_epi32(_mm512_add_epi32(a3, a4), a5));
    sum = _mm512_add_epi32(sum, _mm512_add_epi32(_mm512_add_epi32(a6, a7), a8));
    sum = _mm512_add_epi32(sum, a9);
    alignas(64) int32_t lanes[16];  // not _mm512_reduce_add_epi32: GCC 12 warns inside it
    _mm512_store_si512(lanes, sum);
    volatile int32_t sink = lanes[0] + lanes[15];
    (void)sink;
    return static_cast<double>(iterations) * 10.0 * 128.0;
}

// AVX2 (no VNNI): vpmaddubsw (32 u8 x s8 products, pairs added to int16), vpmaddwd (pairs to
// int32), vpaddd: 32 products, 64 ops per three instructions, as the AVX2 panels do it.
__attribute__((target("avx2"))) double avx2_burst(int64_t iterations, int seed) {
    const __m256i u = _mm256_set1_epi8(static_cast<char>(seed | 1)), s = _mm256_set1_epi8(3);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a0 = _mm256_set1_epi32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0, a8 = a0, a9 = a0;
#define MINFER_STEP(a) a = _mm256_add_epi32(a, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
    for (int64_t i = 0; i < iterations; ++i) {
        MINFER_TEN_CHAINS(MINFER_STEP)
        __asm__ volatile("" : "+x"(a0), "+x"(a5));
    }
#undef MINFER_STEP
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(_mm256_add_epi32(a0, a1), a2),
                                   _mm256_add_epi32(_mm256_add_epi32(a3, a4), a5));
    sum = _mm256_add_epi32(sum, _mm256_add_epi32(_mm256_add_epi32(a6, a7), a8));
    sum = _mm256_add_epi32(sum, a9);
    volatile int sink = _mm256_extract_epi32(sum, 0);
    (void)sink;
    return static_cast<double>(iterations) * 10.0 * 64.0;
}
#elif defined(__aarch64__)
// ARMv8.2 sdot: 16 s8 x s8 products added into 4 int32: 32 ops. As inline assembly, as the
// kernels write it (GCC 12 will not inline vdotq_s32 under a function's target attribute).
double sdot_burst(int64_t iterations, int seed) {
    const int8x16_t u = vdupq_n_s8(static_cast<int8_t>(seed | 1)), s = vdupq_n_s8(3);
    int32x4_t a0 = vdupq_n_s32(0), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0,
              a8 = a0, a9 = a0;
#define MINFER_STEP(a) \
    asm(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b" : "+w"(a) : "w"(u), "w"(s));
    for (int64_t i = 0; i < iterations; ++i) {
        MINFER_TEN_CHAINS(MINFER_STEP)
        __asm__ volatile("" : "+w"(a0), "+w"(a5));
    }
#undef MINFER_STEP
    const int32x4_t sum =
        vaddq_s32(vaddq_s32(vaddq_s32(a0, a1), vaddq_s32(a2, a3)),
                  vaddq_s32(vaddq_s32(vaddq_s32(a4, a5), vaddq_s32(a6, a7)), vaddq_s32(a8, a9)));
    volatile int sink = vaddvq_s32(sum);
    (void)sink;
    return static_cast<double>(iterations) * 10.0 * 32.0;
}
#endif
#undef MINFER_TEN_CHAINS

// The ops one burst of `iterations` rounds does on this CPU's best integer instruction; 0 where
// minfer's kernels have none (then there is no peak to report).
double int8_burst(int64_t iterations, int seed) {
#if defined(__x86_64__)
    if (kernel_path() == KernelPath::kBest && x86_vnni_available()) {
        return vnni512_burst(iterations, seed);
    }
    if (kernel_path() == KernelPath::kBest && __builtin_cpu_supports("avx2")) {
        return avx2_burst(iterations, seed);
    }
#elif defined(__aarch64__)
    if (kernel_path() == KernelPath::kBest && arm_extensions() != ArmExtensions::kNone) {
        return sdot_burst(iterations, seed);
    }
#endif
    (void)iterations;
    (void)seed;
    return 0.0;
}

}  // namespace

double measure_peak_int8_ops(ThreadPool& pool) {
    constexpr int64_t kIterations = 4'000'000;  // ~20 ms a thread at 2 instructions a cycle
    double best = 0;
    for (int pass = 0; pass < 3; ++pass) {  // the best of three: a vCPU can be taken a moment
        std::atomic<double> ops{0.0};
        const auto start = std::chrono::steady_clock::now();
        pool.run([&](int thread, int) {
            const double done = int8_burst(kIterations, thread);
            double expected = ops.load();
            while (!ops.compare_exchange_weak(expected, expected + done)) {
            }
        });
        const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
        best = std::max(best, ops.load() / took.count());
    }
    return best;
}

}  // namespace minfer
