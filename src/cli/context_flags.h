#pragma once
// Flags shared by the commands that run a model (--device, --threads, --ctx, --batch,
// --cache-type, --batch-invariant, --no-repack), and
// MINFER_TRACE=N, which prints every operation of the N-th forward pass (1: the first) with its
// time on stderr.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace minfer::cli {

struct ContextFlags {
    std::string device = "cpu";
    int threads = 0;
    int64_t ctx = 0;
    int64_t batch = 512;
    std::string cache_type = "f16";
    bool no_pin_threads = false;
    bool batch_invariant = true;
    bool repack = true;
};

void add_context_flags(CLI::App* cmd, ContextFlags& flags);
// --device: the backend that runs the model (backend/device.h), checked as it is parsed.
void add_device_flag(CLI::App* cmd, std::string& device);
EngineOptions to_engine_options(const ContextFlags& flags);
// MINFER_TRACE=N: prints every op of the N-th forward pass with its time to stderr (unset: none).
std::function<void(const Op&, double)> trace_from_environment();

}  // namespace minfer::cli
