#include "backend/device.h"

#include <charconv>

#include "backend/reference/reference_backend.h"
#include "backend/split_backend.h"
#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_devices.h"
#include "core/error.h"
#include "core/log.h"
#include "kernels/kernel_path.h"

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

std::string backend_label(const DeviceChoice& device) {
    switch (device.kind) {
        case DeviceKind::kCpu:
            return "CPU";
        case DeviceKind::kReference:
            return "Reference";
        case DeviceKind::kVulkan:
            return "Vulkan";
    }
    return "?";
}

std::string gpu_info(const DeviceChoice& device) {
    if (device.kind != DeviceKind::kVulkan) return "";
    const VulkanDeviceList list = list_vulkan_devices();
    if (static_cast<std::size_t>(device.index) >= list.devices.size()) return "";
    const VulkanDeviceInfo& info = list.devices[static_cast<std::size_t>(device.index)];
    return concat(info.name, " (", info.type, ", ", info.api(), ", driver ", info.driver, ")");
}

std::string device_summary(const DeviceChoice& device) {
    switch (device.kind) {
        case DeviceKind::kCpu:
            return concat("CPU: ", cpu_brand(), ", ", kernels_in_use());
        case DeviceKind::kReference:
            return "Reference (double-precision loops)";
        case DeviceKind::kVulkan:
            return concat("Vulkan: ", gpu_info(device),
                          device.gpu_layers >= 0 ? concat(", -ngl ", device.gpu_layers,
                                                          ": the layers before on the CPU")
                                                 : std::string());
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
        case DeviceKind::kVulkan: {
            require_device_available(device);
            // One cache layer per layer: every architecture minfer runs attends in each.
            const int n_layers = static_cast<int>(options.kv.layers.size());
            if (device.gpu_layers < 0 || device.gpu_layers >= n_layers)
                return make_vulkan_backend(options, device.index);
            if (device.gpu_layers == 0) {
                log_info("minfer: -ngl 0: every layer on the CPU");
                return make_cpu_backend(options, pool);
            }
            const int first = n_layers - device.gpu_layers;
            log_info(concat("minfer: -ngl ", device.gpu_layers, ": layers 0-", first - 1,
                            " on the CPU, ", first, "-", n_layers - 1,
                            " and the output on vulkan:", device.index));
            return make_split_backend(
                make_cpu_backend(front_options(options, first), pool),
                make_vulkan_backend(back_options(options, first), device.index), first);
        }
    }
    throw UsageError("unknown device kind");
}

}  // namespace minfer
