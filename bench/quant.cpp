// Throughput of the reference (scalar) dequantizers and quantizers, per type: values per second
// over a 1M-value buffer (4 MiB of f32, beyond L2). Dequantization speed matters for loading and
// for embedding lookups; quantization speed for `minfer quantize` and activation quantization.

#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "quant/dequantize.h"
#include "quant/quantize.h"

namespace {

constexpr int64_t kValues = 1 << 20;

std::vector<float> sample_values() {
    std::vector<float> x(kValues);
    for (int64_t i = 0; i < kValues; ++i)
        x[static_cast<std::size_t>(i)] = std::sin(0.37f * static_cast<float>(i)) * 0.1f;
    return x;
}

void BM_dequantize(benchmark::State& state, minfer::GgmlType type) {
    const std::vector<float> x = sample_values();
    std::vector<std::byte> q(minfer::row_size(type, kValues));
    minfer::quantize_row(type, x.data(), q.data(), kValues);
    std::vector<float> out(kValues);
    for (auto _ : state) {
        minfer::dequantize_row(type, q.data(), out.data(), kValues);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * kValues);
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(q.size()));
}

void BM_quantize(benchmark::State& state, minfer::GgmlType type) {
    const std::vector<float> x = sample_values();
    std::vector<std::byte> q(minfer::row_size(type, kValues));
    for (auto _ : state) {
        minfer::quantize_row(type, x.data(), q.data(), kValues);
        benchmark::DoNotOptimize(q.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations() * kValues);
}

using minfer::GgmlType;
#define MINFER_QUANT_BENCH(T)                                                        \
    BENCHMARK_CAPTURE(BM_dequantize, T, GgmlType::T)->Unit(benchmark::kMillisecond); \
    BENCHMARK_CAPTURE(BM_quantize, T, GgmlType::T)->Unit(benchmark::kMillisecond)

MINFER_QUANT_BENCH(F16);
MINFER_QUANT_BENCH(BF16);
MINFER_QUANT_BENCH(Q4_0);
MINFER_QUANT_BENCH(Q4_1);
MINFER_QUANT_BENCH(Q5_0);
MINFER_QUANT_BENCH(Q5_1);
MINFER_QUANT_BENCH(Q8_0);
MINFER_QUANT_BENCH(Q2_K);
MINFER_QUANT_BENCH(Q3_K);
MINFER_QUANT_BENCH(Q4_K);
MINFER_QUANT_BENCH(Q5_K);
MINFER_QUANT_BENCH(Q6_K);
MINFER_QUANT_BENCH(Q8_K);
MINFER_QUANT_BENCH(IQ4_NL);

}  // namespace

BENCHMARK_MAIN();
