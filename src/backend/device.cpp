#include "backend/device.h"

#include <charconv>

#include "backend/reference/reference_backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_devices.h"
#include "core/error.h"

namespace minfer {

DeviceChoice parse_device(std::string_view text) {
    if (text == "cpu") return {DeviceKind::kCpu, 0};
    if (text == "reference") return {DeviceKind::kReference, 0};
    if (text == "vulkan") return {DeviceKind::kVulkan, 0};
    if (text.starts_with("vulkan:")) {
        const std::string_view digits = text.substr(7);
        int index = -1;
        const auto [end, error] =
            std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (error == std::errc() && end == digits.data() + digits.size() && index >= 0 &&
            index < 1000)
            return {DeviceKind::kVulkan, index};
    }
    throw UsageError(concat("unknown device '", text,
                            "': expected cpu, reference, vulkan or vulkan:N (minfer "
                            "--list-devices lists them)"));
}

std::string device_name(const DeviceChoice& device) {
    switch (device.kind) {
        case DeviceKind::kCpu:
            return "cpu";
        case DeviceKind::kReference:
            return "reference";
        case DeviceKind::kVulkan:
            return concat("vulkan:", device.index);
    }
    return "?";
}

void require_device_available(const DeviceChoice& device) {
    if (device.kind != DeviceKind::kVulkan) return;
    const VulkanDeviceList vulkan = list_vulkan_devices();
    if (vulkan.devices.empty())
        throw UnsupportedError(concat("--device ", device_name(device), ": ", vulkan.unavailable));
    if (static_cast<std::size_t>(device.index) >= vulkan.devices.size())
        throw UnsupportedError(concat("--device ", device_name(device), ": this machine has ",
                                      vulkan.devices.size(),
                                      " Vulkan device(s); minfer --list-devices lists them"));
}

std::unique_ptr<Backend> make_backend(const DeviceChoice& device, const BackendOptions& options,
                                      ThreadPool& pool) {
    switch (device.kind) {
        case DeviceKind::kCpu:
            return make_cpu_backend(options, pool);
        case DeviceKind::kReference:
            return make_reference_backend(options);
        case DeviceKind::kVulkan:
            require_device_available(device);
            return make_vulkan_backend(options, device.index);
    }
    throw UsageError("unknown device kind");
}

}  // namespace minfer
