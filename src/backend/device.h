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
};

// "cpu", "reference", "vulkan" (the first Vulkan device), "vulkan:N". Throws UsageError naming
// the text and the accepted forms.
DeviceChoice parse_device(std::string_view text);
std::string device_name(const DeviceChoice& device);

// Throws UnsupportedError when this build or machine cannot run `device`, naming what is missing
// (checked with the flags, before a model is loaded).
void require_device_available(const DeviceChoice& device);

// The backend for `device`. Throws UnsupportedError where this build or machine cannot run it
// (no Vulkan in the build, no such device), naming what is missing.
std::unique_ptr<Backend> make_backend(const DeviceChoice& device, const BackendOptions& options,
                                      ThreadPool& pool);

}  // namespace minfer
