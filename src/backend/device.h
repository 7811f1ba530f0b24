#pragma once
// Which backend runs a model's graphs: `--device cpu|reference|vulkan|vulkan:N`, as llama.cpp's
// users name devices. The CPU backend is the default; the reference backend (backend/reference)
// is the slow oracle; Vulkan devices are listed by `minfer --list-devices` (backend/vulkan).

#include <memory>
#include <string>
#include <string_view>

#include "backend/backend.h"

namespace minfer {

enum class DeviceKind : uint8_t { kCpu, kReference, kVulkan };

struct DeviceChoice {
    DeviceKind kind = DeviceKind::kCpu;
    int index = 0;  // vulkan:N: the N-th Vulkan device of --list-devices
    // -ngl N (vulkan only): the last N layers and the output on the device, the layers before on
    // the CPU (backend/split_backend.h); 0 runs every layer on the CPU; -1 (the default) or N at
    // least the model's layers runs everything on the device.
    int gpu_layers = -1;
};

// "cpu", "reference", "vulkan" (the first Vulkan device), "vulkan:N". Throws UsageError naming
// the text and the accepted forms.
DeviceChoice parse_device(std::string_view text);
std::string device_name(const DeviceChoice& device);

// llama-bench's "backends" field: "CPU", "Reference", "Vulkan".
std::string backend_label(const DeviceChoice& device);
// llama-bench's "gpu_info" field: a Vulkan device's name, type, API and driver ("" for the CPU
// backends, and for a device this machine does not have).
std::string gpu_info(const DeviceChoice& device);
// What runs the graphs, in a line: "CPU: Intel(R) Xeon(R) Processor, AVX3 VNNI BF16",
// "Vulkan: llvmpipe (LLVM 15.0.6, 256 bits) (cpu, Vulkan 1.3.255, driver Mesa 23.2.1)" (with
// ", -ngl 12: the layers before on the CPU" for a split), "Reference (double-precision loops)".
std::string device_summary(const DeviceChoice& device);

// Throws UnsupportedError when this build or machine cannot run `device`, naming what is missing
// (checked with the flags, before a model is loaded).
void require_device_available(const DeviceChoice& device);

// The backend for `device`. Throws UnsupportedError where this build or machine cannot run it
// (no Vulkan in the build, no such device), naming what is missing.
std::unique_ptr<Backend> make_backend(const DeviceChoice& device, const BackendOptions& options,
                                      ThreadPool& pool);

}  // namespace minfer
