// VulkanDeviceInfo's printing, compiled with and without Vulkan (CMake leaves the files directly in
// backend/vulkan out of a build without it, but --list-devices and bench print devices in both).

#include "backend/vulkan/vulkan_devices.h"
#include "core/error.h"

namespace minfer {

std::string VulkanDeviceInfo::api() const {
    // VK_API_VERSION_MAJOR / MINOR, without the Vulkan headers: bits 22-28 and 12-21.
    return concat("Vulkan ", (api_version >> 22) & 0x7Fu, ".", (api_version >> 12) & 0x3FFu);
}

std::string VulkanDeviceInfo::features() const {
    std::string out;
    const auto add = [&out](bool present, const char* feature) {
        if (present) out += concat(out.empty() ? "" : " ", feature);
    };
    add(float16, "fp16");
    add(int8, "int8");
    add(storage_16bit, "16bit-storage");
    add(storage_8bit, "8bit-storage");
    add(integer_dot_product, "int-dot");
    add(cooperative_matrix_khr, "coopmat");
    add(cooperative_matrix_nv, "coopmat-nv");
    add(external_memory_host, "host-memory");
    return out;
}

}  // namespace minfer
