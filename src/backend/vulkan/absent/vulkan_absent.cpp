// The Vulkan entry points of a build without Vulkan (CMake found no Vulkan headers, volk or glslc:
// MINFER_VULKAN off). Only this file of backend/vulkan is compiled then.

#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_devices.h"
#include "core/error.h"

namespace minfer {

VulkanDeviceList list_vulkan_devices() {
    VulkanDeviceList list;
    list.unavailable =
        "this minfer was built without Vulkan (install libvulkan-dev, libvulkan-volk-dev and "
        "glslc, then build again)";
    return list;
}

bool vulkan_built() {
    return false;
}

std::unique_ptr<Backend> make_vulkan_backend(const BackendOptions&, int) {
    throw UnsupportedError(list_vulkan_devices().unavailable);
}

}  // namespace minfer
