// machine_limits: what this machine's cores can do right now, as one JSON object on stdout, for
// benchmark scripts that set a speed against it (scripts/bench-peers.py samples it between the
// engines' runs, since a shared VM's memory bandwidth moves from minute to minute):
//
//   machine_limits [--threads N] [--only read|int8|f32]
//   {"threads": 2, "read_gbps": 41.2, "int8_tops": 1.43, "f32_tflops": 0.31, "kernels": "..."}
//
// read_gbps: a 256 MiB buffer read by every thread (best of three passes); int8_tops: independent
// chains of the integer GEMM panels' instruction (vpdpbusd, maddubs/madd, sdot; 0 without one);
// f32_tflops: FMA chains.

#include <CLI/CLI.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "core/cpu_set.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "kernels/kernel_path.h"
#include "kernels/machine_limits.h"

int main(int argc, char** argv) {
    using namespace minfer;
    CLI::App app{"Measures this machine's read bandwidth and int8 and f32 peaks; prints JSON"};
    int threads = usable_cpu_count();
    std::string only;
    app.add_option("-t,--threads", threads, "Threads (default: every usable CPU)")
        ->check(CLI::Range(1, 1024));
    app.add_option("--only", only, "Measure one: read, int8 or f32")
        ->check(CLI::IsMember({"read", "int8", "f32"}));
    CLI11_PARSE(app, argc, argv);
    try {
        const auto pool = shared_thread_pool(threads, /*pin_threads=*/true);
        nlohmann::ordered_json out = {{"threads", threads}, {"kernels", kernels_in_use()}};
        if (only.empty() || only == "read") {
            ReadBandwidthProbe probe(*pool, std::size_t{256} << 20);
            out["read_gbps"] = probe.measure() / 1e9;
        }
        if (only.empty() || only == "int8") out["int8_tops"] = measure_peak_int8_ops(*pool) / 1e12;
        if (only.empty() || only == "f32") out["f32_tflops"] = measure_peak_fma_flops(*pool) / 1e12;
        std::printf("%s\n", out.dump().c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "machine_limits: %s\n", e.what());
        return 1;
    }
    return 0;
}
