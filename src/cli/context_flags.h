#pragma once
// Flags shared by the commands that run a model (--device, -ngl, --threads, --ctx, --batch,
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
    int gpu_layers = -1;  // -ngl: -1 every layer on the device
    int threads = 0;
    int64_t ctx = 0;
    int64_t batch = 512;
    std::string cache_type = "f16";
    bool no_pin_threads = false;
    bool batch_invariant = true;
    bool repack = true;
};

void add_context_flags(CLI::App* cmd, ContextFlags& flags);
// --device: the backend that runs the model (backend/device.h), checked as it is parsed, and
// -ngl/--gpu-layers N: the last N layers on it, the rest on the CPU.
void add_device_flags(CLI::App* cmd, std::string& device, int& gpu_layers);
// The device the two flags choose; warns once when -ngl is given without a Vulkan device (it is
// ignored then, as llama.cpp ignores it without a GPU).
DeviceChoice device_choice(const std::string& device, int gpu_layers);
EngineOptions to_engine_options(const ContextFlags& flags);
// MINFER_TRACE=N: prints every op of the N-th forward pass with its time to stderr (unset: none).
std::function<void(const Op&, double)> trace_from_environment();

}  // namespace minfer::cli
