// Kernel benchmarks. First the machine's limits (read bandwidth of a large buffer with 1 and 2
// threads, peak f32 FMA rate), then matmul on a 4096 x 4096 weight: GEMV (one token) in GB/s of
// weights read and as a fraction of the measured bandwidth, and GEMM (512 tokens) in GFLOP/s
// (2 * rows * cols * tokens per call), on 1 and 2 threads; then one token on Qwen2 0.5B's
// matrices in the fast and the batch-invariant mode (BM_GemvFast / BM_GemvInvariant). Also the
// thread pool's dispatch overhead. The "Packed" variants run the same products on the interleaved
// layout the CPU backend builds at load (kernels/packed_layout.h). One token's attention over a
// long cache (BM_AttendGroup). Benchmarks run in registration order, so the limits are known when
// matmul runs.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul.h"
#include "kernels/packed_layout.h"
#include "quant/block_types.h"
#include "quant/quantize.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using minfer::GgmlType;

double g_bandwidth[3] = {0, 0, 0};  // bytes/s by thread count

minfer::ThreadPool& pool_of(int n_threads) {
    static std::map<int, std::unique_ptr<minfer::ThreadPool>> pools;
    auto& p = pools[n_threads];
    // Pinned: on this shared 2-vCPU machine unpinned workers were often stacked on one CPU.
    if (!p) p = std::make_unique<minfer::ThreadPool>(n_threads, /*pin_threads=*/true);
    return *p;
}

// ---- machine limits ----

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sum_bytes(const std::byte* p, std::size_t n) {
    __m256i acc0 = _mm256_setzero_si256(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (std::size_t i = 0; i + 128 <= n; i += 128) {
        const auto* v = reinterpret_cast<const __m256i*>(p + i);
        acc0 = _mm256_add_epi64(acc0, _mm256_load_si256(v));
        acc1 = _mm256_add_epi64(acc1, _mm256_load_si256(v + 1));
        acc2 = _mm256_add_epi64(acc2, _mm256_load_si256(v + 2));
        acc3 = _mm256_add_epi64(acc3, _mm256_load_si256(v + 3));
    }
    const __m256i s = _mm256_add_epi64(_mm256_add_epi64(acc0, acc1), _mm256_add_epi64(acc2, acc3));
    alignas(32) uint64_t lanes[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#else
uint64_t sum_bytes(const std::byte* p, std::size_t n) {
    uint64_t s = 0;
    for (std::size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, p + i, 8);
        s += v;
    }
    return s;
}
#endif

void BM_ReadBandwidth(benchmark::State& state) {
    const int n_threads = static_cast<int>(state.range(0));
    constexpr std::size_t kBytes = std::size_t{1} << 30;  // far beyond the 32 MiB L3
    static std::vector<std::byte> buffer(kBytes + 64, std::byte{1});
    std::byte* base = reinterpret_cast<std::byte*>(
        (reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t{63});
    auto& pool = pool_of(n_threads);
    std::atomic<uint64_t> sink{0};
    for (auto _ : state) {
        pool.run([&](int i, int n) {
            const std::size_t chunk = kBytes / static_cast<std::size_t>(n);
            sink += sum_bytes(base + chunk * static_cast<std::size_t>(i), chunk);
        });
    }
    benchmark::DoNotOptimize(sink.load());
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                            static_cast<int64_t>(kBytes));
    state.counters["GB/s"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * kBytes * 1e-9, benchmark::Counter::kIsRate);
}

// Peak f32 FMA rate: 12 independent register accumulators per thread (covers FMA latency x
// throughput on AVX-512 and AVX2 machines).
#if defined(__x86_64__)
__attribute__((target("avx512f"))) float fma_loop_avx512(int64_t iters) {
    __m512 acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm512_set1_ps(static_cast<float>(k));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
        for (int k = 0; k < 12; ++k) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
        asm volatile("" ::: "memory");
    }
    __m512 s = acc[0];
    for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, acc[k]);
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, s);
    return lanes[0];
}
__attribute__((target("avx2,fma"))) float fma_loop_avx2(int64_t iters) {
    __m256 acc[12];
    for (int k = 0; k < 12; ++k) acc[k] = _mm256_set1_ps(static_cast<float>(k));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (int64_t i = 0; i < iters; ++i) {
        for (int k = 0; k < 12; ++k) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
        asm volatile("" ::: "memory");
    }
    alignas(32) float lanes[8];
    __m256 s = acc[0];
    for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, acc[k]);
    _mm256_store_ps(lanes, s);
    return lanes[0];
}
#endif

void BM_PeakFma(benchmark::State& state) {
    const int n_threads = static_cast<int>(state.range(0));
    constexpr int64_t kIters = 1 << 22;
    auto& pool = pool_of(n_threads);
    std::atomic<float> sink{0};
    int lanes = 1;
    for (auto _ : state) {
        pool.run([&](int, int) {
#if defined(__x86_64__)
            if (__builtin_cpu_supports("avx512f")) {
                sink = fma_loop_avx512(kIters);
                lanes = 16;
            } else {
                sink = fma_loop_avx2(kIters);
                lanes = 8;
            }
#endif
        });
    }
    benchmark::DoNotOptimize(sink.load());
    state.counters["GFLOP/s"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * n_threads * kIters * 12 * lanes * 2 * 1e-9,
        benchmark::Counter::kIsRate);
}

// ---- thread pool ----

void BM_PoolDispatch(benchmark::State& state) {
    auto& pool = pool_of(static_cast<int>(state.range(0)));
    std::atomic<int> counter{0};
    for (auto _ : state)
        pool.run([&](int, int) { counter.fetch_add(1, std::memory_order_relaxed); });
    state.counters["us/run"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * 1e-6,
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// ---- attention ----

// One token's attention on one core, as a decode step of Qwen2 0.5B runs it per KV head: 7 query
// heads of 64 dimensions against state.range(0) positions of an f16 cache (256 bytes of K and V a
// position). state.range(1) copies of the cache, used in turn: 1 keeps a short cache in L2, 256
// copies of 4096 positions (256 MiB) come from DRAM, as a layer's cache does at depth 4096 (the
// matrices between two layers' attention evict it). GB/s: cache bytes read a second, against
// BM_ReadBandwidth/1.
void BM_AttendGroup(benchmark::State& state) {
    constexpr int64_t kGroup = 7, kHeadDim = 64;
    const int64_t n_keys = state.range(0), copies = state.range(1);
    const int64_t n_tiles = (n_keys + minfer::kAttentionKeyTile - 1) / minfer::kAttentionKeyTile;
    const int64_t tile_values = minfer::kAttentionKeyTile * kHeadDim;
    // Each copy: its K tiles, then its V tiles, one run (as the CPU backend's pool lays a head
    // out).
    std::vector<uint16_t> cache(static_cast<std::size_t>(copies * 2 * n_tiles * tile_values));
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& x : cache) x = minfer::f32_to_f16(normal(rng));
    std::vector<const void*> k_tiles, v_tiles;
    for (int64_t c = 0; c < copies; ++c) {
        for (int64_t t = 0; t < n_tiles; ++t) {
            k_tiles.push_back(cache.data() + ((c * 2) * n_tiles + t) * tile_values);
            v_tiles.push_back(cache.data() + ((c * 2 + 1) * n_tiles + t) * tile_values);
        }
    }
    std::vector<float> q(kGroup * kHeadDim), out(kGroup * kHeadDim);
    for (auto& x : q) x = normal(rng);
    minfer::AttentionScratch scratch;
    int64_t c = 0;
    for (auto _ : state) {
        minfer::AttentionGroup a;
        a.q = q.data();
        a.q_stride = kHeadDim;
        a.group = kGroup;
        a.k_tiles = k_tiles.data() + c * n_tiles;
        a.v_tiles = v_tiles.data() + c * n_tiles;
        a.n_keys = n_keys;
        a.head_dim_k = a.head_dim_v = kHeadDim;
        a.scale = 0.125f;
        a.out = out.data();
        a.out_stride = kHeadDim;
        minfer::attend_group(a, scratch);
        benchmark::DoNotOptimize(out.data());
        c = (c + 1) % copies;
    }
    state.counters["GB/s"] =
        benchmark::Counter(static_cast<double>(state.iterations() * 2 * n_keys * kHeadDim * 2),
                           benchmark::Counter::kIsRate);
}

// ---- matmul ----

constexpr int64_t kDim = 4096;

// GEMV must stream from DRAM as in decoding (a model is far larger than the L3), so it cycles
// through copies of the matrix spanning at least 128 MiB, four times the 32 MiB L3.
constexpr std::size_t kStreamBytes = std::size_t{128} << 20;

struct alignas(64) Line {
    std::byte bytes[64];
};

struct Weights {
    GgmlType type = GgmlType::F32;
    int64_t n_cols = 0, n_rows = 0;
    std::vector<std::byte> bytes;  // n_copies copies of one matrix
    std::size_t matrix_bytes = 0;
    std::size_t n_copies = 1;
    std::vector<Line> packed;  // the copies interleaved (after pack())
    std::size_t packed_bytes = 0;
    minfer::WeightMatrix view(std::size_t copy = 0) const {
        minfer::WeightMatrix w{
            type, n_cols, n_rows,
            std::span<const std::byte>(bytes).subspan(copy * matrix_bytes, matrix_bytes)};
        if (!packed.empty()) {
            w.packed = std::span<const std::byte>(packed.front().bytes + copy * packed_bytes,
                                                  packed_bytes);
        }
        return w;
    }
    void pack() {
        if (!packed.empty()) return;
        const auto layout = minfer::kernels::packed_layout(type, n_cols, n_rows);
        packed_bytes = (layout.bytes() + 63) / 64 * 64;
        packed.resize(packed_bytes / 64 * n_copies);
        for (std::size_t c = 0; c < n_copies; ++c) {
            const minfer::WeightMatrix w{
                type, n_cols, n_rows,
                std::span<const std::byte>(bytes).subspan(c * matrix_bytes, matrix_bytes)};
            minfer::kernels::repack_groups(w, 0, layout.n_groups,
                                           packed.front().bytes + c * packed_bytes);
        }
    }
};

// One matrix set at a time (the benchmarks of one matrix run one after the other; the 151936-row
// output matrices take up to 272 MB each).
const Weights& weights_of(GgmlType type, int64_t n_cols = kDim, int64_t n_rows = kDim,
                          bool packed = false) {
    static Weights w;
    if (w.type == type && w.n_cols == n_cols && w.n_rows == n_rows) {
        if (packed) w.pack();
        if (!packed) w.packed.clear();
        return w;
    }
    w = Weights{};
    // Roughly normal weights (sum of 4 uniforms) from a cheap generator; 1024 distinct rows
    // repeated (the speed does not depend on the values), so that setup stays fast.
    uint64_t state = 0x9E3779B97F4A7C15ull;
    auto uniform = [&state] {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return static_cast<float>(state >> 40) * 0x1p-24f - 0.5f;
    };
    auto normal = [&] { return (uniform() + uniform() + uniform() + uniform()) * 0.035f; };
    std::vector<float> row(static_cast<std::size_t>(n_cols));
    const std::size_t row_bytes = minfer::row_size(type, n_cols);
    w.type = type;
    w.n_cols = n_cols;
    w.n_rows = n_rows;
    w.matrix_bytes = row_bytes * static_cast<std::size_t>(n_rows);
    w.n_copies = (kStreamBytes + w.matrix_bytes - 1) / w.matrix_bytes;
    w.bytes.resize(w.matrix_bytes * w.n_copies);
    constexpr int64_t kDistinctRows = 1024;
    for (int64_t r = 0; r < n_rows; ++r) {
        std::byte* dst = w.bytes.data() + r * row_bytes;
        if (r >= kDistinctRows) {
            std::memcpy(dst, w.bytes.data() + (r % kDistinctRows) * row_bytes, row_bytes);
            continue;
        }
        if (type == GgmlType::IQ4_XS) {  // no quantizer: random codes and scales, a small d
            auto* blocks = reinterpret_cast<minfer::block_iq4_xs*>(dst);
            for (int64_t i = 0; i < n_cols / minfer::QK_K; ++i) {
                auto* bytes = reinterpret_cast<uint8_t*>(&blocks[i]);
                for (std::size_t k = 0; k < sizeof(blocks[i]); ++k) {
                    bytes[k] = static_cast<uint8_t>(uniform() * 256.0f + 128.0f);
                }
                blocks[i].d = minfer::f32_to_f16(0.01f);
            }
            continue;
        }
        for (float& v : row) v = normal();
        minfer::quantize_row(type, row.data(), dst, n_cols);
    }
    for (std::size_t c = 1; c < w.n_copies; ++c) {
        std::memcpy(w.bytes.data() + c * w.matrix_bytes, w.bytes.data(), w.matrix_bytes);
    }
    if (packed) w.pack();
    return w;
}

std::vector<float> activations(int64_t n_tokens, int64_t n_cols = kDim) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(n_tokens * n_cols));
    for (float& v : x) v = normal(rng);
    return x;
}

// n_tokens tokens against an n_cols x n_rows matrix streamed from DRAM, in GB/s of weights read
// (and as a fraction of the measured read bandwidth).
void gemv(benchmark::State& state, GgmlType type, int64_t n_cols, int64_t n_rows,
          minfer::MatmulMode mode, bool packed, int64_t n_tokens) {
    const int n_threads = static_cast<int>(state.range(0));
    const Weights& w = weights_of(type, n_cols, n_rows, packed);
    const std::vector<float> x = activations(n_tokens, n_cols);
    std::vector<float> y(static_cast<std::size_t>(n_rows * n_tokens));
    minfer::MatmulScratch scratch;
    auto& pool = pool_of(n_threads);
    std::size_t copy = 0;
    for (auto _ : state) {
        minfer::matmul(w.view(copy), x.data(), n_tokens, y.data(), pool, scratch, mode);
        copy = (copy + 1) % w.n_copies;
        benchmark::ClobberMemory();
    }
    const double bytes = static_cast<double>(w.matrix_bytes);
    state.counters["GB/s"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * bytes * 1e-9, benchmark::Counter::kIsRate);
    const double bw = g_bandwidth[n_threads <= 2 ? n_threads : 2];
    if (bw > 0) {
        state.counters["%bw"] =
            benchmark::Counter(static_cast<double>(state.iterations()) * bytes / bw * 100.0,
                               benchmark::Counter::kIsRate);
    }
}

void BM_Gemv(benchmark::State& state, GgmlType type) {
    gemv(state, type, kDim, kDim, minfer::MatmulMode::kGemvForOneToken, /*packed=*/false, 1);
}
void BM_GemvPacked(benchmark::State& state, GgmlType type) {
    gemv(state, type, kDim, kDim, minfer::MatmulMode::kBatchInvariant, /*packed=*/true, 1);
}
// Rows [0, n_rows) of w (the file's bytes of copy 0) as a matrix with an interleaved copy of its
// own in `packed`.
minfer::WeightMatrix packed_prefix(const Weights& w, int64_t n_rows, std::vector<Line>& packed) {
    const std::size_t row_bytes = minfer::row_size(w.type, w.n_cols);
    minfer::WeightMatrix m{w.type, w.n_cols, n_rows,
                           std::span<const std::byte>(w.bytes).subspan(0, row_bytes * n_rows)};
    const auto layout = minfer::kernels::packed_layout(w.type, w.n_cols, n_rows);
    packed.assign((layout.bytes() + 63) / 64, Line{});
    minfer::kernels::repack_groups(m, 0, layout.n_groups, packed.front().bytes);
    m.packed = std::span<const std::byte>(packed.front().bytes, layout.bytes());
    return m;
}

// One core's kernel on a matrix of about state.range(0) KiB (at least 64 rows: the float kernels
// take four groups of 16 at a time, so F16 and BF16 take 512 KiB at "384") multiplied again and
// again: 384 fits a Zen 4's L2 (the kernel's own speed, what one core computes when memory is not
// the limit), 8192 the L3 on paper. A 4096 x 4096 matrix (9.4 MB of Q4_K) multiplied so did not
// stay in the shared L3 of the Zen 4 VM: 22-25 GB/s there, 26-30 from L2 with the same kernel.
// Each iteration times the matrix (kDim columns), then its first 16 rows as a matrix of their own;
// GB/s is the difference of bytes over the difference of time, so what every call costs besides
// its rows (quantizing the activations, the dispatch) drops out. state.range(1) tokens at once
// (1: decoding one sequence; 8 and 16: many), GOP/s against machine_limits' int8 peak of a core.
void BM_GemvPackedInCache(benchmark::State& state, GgmlType type) {
    using Clock = std::chrono::steady_clock;
    const auto row_bytes = static_cast<int64_t>(minfer::row_size(type, kDim));
    const int64_t rows = std::max<int64_t>(64, (state.range(0) << 10) / row_bytes / 16 * 16);
    const Weights& w = weights_of(type, kDim, rows);
    std::vector<Line> big_packed, small_packed;
    const minfer::WeightMatrix big = packed_prefix(w, rows, big_packed);
    const minfer::WeightMatrix small = packed_prefix(w, 16, small_packed);
    const int64_t n_tokens = state.range(1);
    const std::vector<float> x = activations(n_tokens);
    std::vector<float> y(static_cast<std::size_t>(rows * n_tokens));
    minfer::MatmulScratch scratch;
    auto& pool = pool_of(1);
    auto multiply = [&](const minfer::WeightMatrix& m) {
        minfer::matmul(m, x.data(), n_tokens, y.data(), pool, scratch,
                       minfer::MatmulMode::kBatchInvariant);
    };
    // Once each untimed: the first calls' page faults (scratch, y) would not cancel.
    multiply(big);
    multiply(small);
    double big_s = 0, small_s = 0;
    for (auto _ : state) {
        const auto t0 = Clock::now();
        multiply(big);
        const auto t1 = Clock::now();
        multiply(small);
        const auto t2 = Clock::now();
        benchmark::ClobberMemory();
        big_s += std::chrono::duration<double>(t1 - t0).count();
        small_s += std::chrono::duration<double>(t2 - t1).count();
        state.SetIterationTime(std::chrono::duration<double>(t2 - t0).count());
    }
    const double bytes = static_cast<double>((rows - 16) * row_bytes);
    const double seconds =
        std::max(big_s - small_s, 1e-9) / static_cast<double>(state.iterations());
    state.counters["GB/s"] = bytes / seconds * 1e-9;
    // Two operations per weight and token (the int8 peak's unit: machine_limits).
    state.counters["GOP/s"] =
        2.0 * static_cast<double>(kDim * (rows - 16) * n_tokens) / seconds * 1e-9;
}

// The same with the other choice of the x86 kernels' software prefetches than this CPU's
// (kernel_path.h), to check that choice on a new machine.
void BM_GemvPackedOtherPrefetch(benchmark::State& state, GgmlType type) {
    const std::string kernels = minfer::kernels_in_use();
    if (kernels.rfind("AVX2", 0) != 0 && kernels.rfind("AVX3", 0) != 0) {
        state.SkipWithError("only the AVX2 and AVX-512 kernels issue software prefetches");
        return;
    }
    minfer::set_x86_software_prefetch(!minfer::software_prefetch_pays());
    gemv(state, type, kDim, kDim, minfer::MatmulMode::kBatchInvariant, /*packed=*/true, 1);
    minfer::set_x86_software_prefetch(minfer::software_prefetch_pays());
}

// Decoding's matrices of Qwen2 0.5B (n_cols x n_rows: 896 x 4864 FFN up/gate, 4864 x 896 FFN
// down, 896 x 151936 output), one token, in the fast mode (GEMV) and in the batch-invariant mode
// (GEMM panels), for the cost of batch invariance per matrix.
void BM_GemvFast(benchmark::State& state, GgmlType type, int64_t n_cols, int64_t n_rows) {
    gemv(state, type, n_cols, n_rows, minfer::MatmulMode::kGemvForOneToken, /*packed=*/false,
         state.range(1));
}
void BM_GemvInvariant(benchmark::State& state, GgmlType type, int64_t n_cols, int64_t n_rows) {
    gemv(state, type, n_cols, n_rows, minfer::MatmulMode::kBatchInvariant, /*packed=*/false,
         state.range(1));
}
void BM_GemvPackedShape(benchmark::State& state, GgmlType type, int64_t n_cols, int64_t n_rows) {
    gemv(state, type, n_cols, n_rows, minfer::MatmulMode::kBatchInvariant, /*packed=*/true,
         state.range(1));
}

void gemm(benchmark::State& state, GgmlType type, bool packed) {
    const int n_threads = static_cast<int>(state.range(0));
    constexpr int64_t kTokens = 512;
    const Weights& w = weights_of(type, kDim, kDim, packed);
    const std::vector<float> x = activations(kTokens);
    std::vector<float> y(static_cast<std::size_t>(kDim * kTokens));
    minfer::MatmulScratch scratch;
    auto& pool = pool_of(n_threads);
    for (auto _ : state) {
        minfer::matmul(w.view(), x.data(), kTokens, y.data(), pool, scratch);
        benchmark::ClobberMemory();
    }
    state.counters["GFLOP/s"] = benchmark::Counter(
        static_cast<double>(state.iterations()) * 2.0 * kDim * kDim * kTokens * 1e-9,
        benchmark::Counter::kIsRate);
}
void BM_Gemm(benchmark::State& state, GgmlType type) {
    gemm(state, type, false);
}
void BM_GemmPacked(benchmark::State& state, GgmlType type) {
    gemm(state, type, true);
}

// Records the bandwidth measured by BM_ReadBandwidth for the GEMV percentages.
class BandwidthReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& run : runs) {
            if (run.benchmark_name().rfind("BM_ReadBandwidth/", 0) == 0 &&
                !run.aggregate_name.size()) {
                const int threads = std::stoi(run.benchmark_name().substr(17));
                auto it = run.counters.find("GB/s");
                if (it != run.counters.end() && threads >= 1 && threads <= 2) {
                    g_bandwidth[threads] = it->second.value * 1e9;
                }
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
};

}  // namespace

BENCHMARK(BM_ReadBandwidth)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PeakFma)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PoolDispatch)->Arg(1)->Arg(2)->UseRealTime();
BENCHMARK(BM_AttendGroup)
    ->Args({256, 1})
    ->Args({4096, 1})
    ->Args({4096, 256})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

#define MINFER_MATMUL_BENCH(TYPE)                    \
    BENCHMARK_CAPTURE(BM_Gemv, TYPE, GgmlType::TYPE) \
        ->Arg(1)                                     \
        ->Arg(2)                                     \
        ->UseRealTime()                              \
        ->Unit(benchmark::kMicrosecond);             \
    BENCHMARK_CAPTURE(BM_Gemm, TYPE, GgmlType::TYPE) \
        ->Arg(1)                                     \
        ->Arg(2)                                     \
        ->UseRealTime()                              \
        ->Unit(benchmark::kMillisecond)
#define MINFER_PACKED_BENCH(TYPE)                                 \
    BENCHMARK_CAPTURE(BM_GemvPacked, TYPE, GgmlType::TYPE)        \
        ->Arg(1)                                                  \
        ->Arg(2)                                                  \
        ->UseRealTime()                                           \
        ->Unit(benchmark::kMicrosecond);                          \
    BENCHMARK_CAPTURE(BM_GemvPackedInCache, TYPE, GgmlType::TYPE) \
        ->ArgsProduct({{384, 8192}, {1, 8, 16}})                  \
        ->UseManualTime()                                         \
        ->Unit(benchmark::kMicrosecond);                          \
    BENCHMARK_CAPTURE(BM_GemmPacked, TYPE, GgmlType::TYPE)        \
        ->Arg(1)                                                  \
        ->Arg(2)                                                  \
        ->UseRealTime()                                           \
        ->Unit(benchmark::kMillisecond)
MINFER_MATMUL_BENCH(Q4_0);
MINFER_PACKED_BENCH(Q4_0);
MINFER_MATMUL_BENCH(Q8_0);
MINFER_PACKED_BENCH(Q8_0);
MINFER_MATMUL_BENCH(Q4_K);
MINFER_PACKED_BENCH(Q4_K);
MINFER_MATMUL_BENCH(Q6_K);
MINFER_PACKED_BENCH(Q6_K);
MINFER_MATMUL_BENCH(Q5_0);
MINFER_PACKED_BENCH(Q5_0);
MINFER_MATMUL_BENCH(Q5_K);
MINFER_PACKED_BENCH(Q5_K);
MINFER_MATMUL_BENCH(IQ4_XS);
MINFER_PACKED_BENCH(IQ4_XS);
MINFER_MATMUL_BENCH(IQ4_NL);
MINFER_PACKED_BENCH(IQ4_NL);
MINFER_MATMUL_BENCH(F16);
MINFER_PACKED_BENCH(F16);
MINFER_MATMUL_BENCH(BF16);
MINFER_PACKED_BENCH(BF16);
// The quantized types' GEMV with the other prefetch choice (the float kernels issue none).
#define MINFER_OTHER_PREFETCH_BENCH(TYPE)                               \
    BENCHMARK_CAPTURE(BM_GemvPackedOtherPrefetch, TYPE, GgmlType::TYPE) \
        ->Arg(1)                                                        \
        ->Arg(2)                                                        \
        ->UseRealTime()                                                 \
        ->Unit(benchmark::kMicrosecond)
MINFER_OTHER_PREFETCH_BENCH(Q4_0);
MINFER_OTHER_PREFETCH_BENCH(Q8_0);
MINFER_OTHER_PREFETCH_BENCH(Q4_K);
MINFER_OTHER_PREFETCH_BENCH(Q6_K);
MINFER_OTHER_PREFETCH_BENCH(Q5_0);
MINFER_OTHER_PREFETCH_BENCH(Q5_K);
MINFER_OTHER_PREFETCH_BENCH(IQ4_XS);
MINFER_OTHER_PREFETCH_BENCH(IQ4_NL);

// Arguments: threads, tokens (1 to 16: sequences decoding together).
#define MINFER_DECODE_BENCH(TYPE, NAME, COLS, ROWS)                                \
    BENCHMARK_CAPTURE(BM_GemvFast, TYPE##_##NAME, GgmlType::TYPE, COLS, ROWS)      \
        ->ArgsProduct({{1, 2}, {1, 2, 3, 4, 8, 16}})                               \
        ->UseRealTime()                                                            \
        ->Unit(benchmark::kMicrosecond);                                           \
    BENCHMARK_CAPTURE(BM_GemvInvariant, TYPE##_##NAME, GgmlType::TYPE, COLS, ROWS) \
        ->ArgsProduct({{1, 2}, {1, 2, 3, 4, 8, 16}})                               \
        ->UseRealTime()                                                            \
        ->Unit(benchmark::kMicrosecond)
#define MINFER_PACKED_DECODE_BENCH(TYPE, NAME, COLS, ROWS)                           \
    BENCHMARK_CAPTURE(BM_GemvPackedShape, TYPE##_##NAME, GgmlType::TYPE, COLS, ROWS) \
        ->ArgsProduct({{1, 2}, {1, 2, 3, 4, 8, 16}})                                 \
        ->UseRealTime()                                                              \
        ->Unit(benchmark::kMicrosecond)
#define MINFER_DECODE_BENCHES(TYPE)                 \
    MINFER_DECODE_BENCH(TYPE, 896x4864, 896, 4864); \
    MINFER_DECODE_BENCH(TYPE, 4864x896, 4864, 896); \
    MINFER_DECODE_BENCH(TYPE, 896x151936, 896, 151936)
#define MINFER_PACKED_DECODE_BENCHES(TYPE)                 \
    MINFER_PACKED_DECODE_BENCH(TYPE, 896x4864, 896, 4864); \
    MINFER_PACKED_DECODE_BENCH(TYPE, 4864x896, 4864, 896); \
    MINFER_PACKED_DECODE_BENCH(TYPE, 896x151936, 896, 151936)
MINFER_DECODE_BENCHES(Q4_0);
MINFER_PACKED_DECODE_BENCHES(Q4_0);
MINFER_DECODE_BENCHES(Q8_0);
MINFER_PACKED_DECODE_BENCHES(Q8_0);
MINFER_DECODE_BENCHES(Q5_0);
MINFER_PACKED_DECODE_BENCHES(Q5_0);
// The K-quants need rows of a multiple of 256 values: Llama 1.1B's 2048 x 5632 and 5632 x 2048.
#define MINFER_K_DECODE_BENCHES(TYPE)                        \
    MINFER_DECODE_BENCH(TYPE, 2048x5632, 2048, 5632);        \
    MINFER_PACKED_DECODE_BENCH(TYPE, 2048x5632, 2048, 5632); \
    MINFER_DECODE_BENCH(TYPE, 5632x2048, 5632, 2048);        \
    MINFER_PACKED_DECODE_BENCH(TYPE, 5632x2048, 5632, 2048); \
    MINFER_DECODE_BENCH(TYPE, 2048x32000, 2048, 32000);      \
    MINFER_PACKED_DECODE_BENCH(TYPE, 2048x32000, 2048, 32000)
MINFER_K_DECODE_BENCHES(Q4_K);
MINFER_K_DECODE_BENCHES(Q6_K);
MINFER_DECODE_BENCHES(F16);

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    BandwidthReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    benchmark::Shutdown();
    return 0;
}
