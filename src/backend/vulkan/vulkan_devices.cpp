#include "backend/vulkan/vulkan_devices.h"

#include <algorithm>
#include <cstring>

#include "backend/vulkan/vulkan_instance.h"
#include "core/error.h"

namespace minfer {
namespace {

const char* device_type(VkPhysicalDeviceType type) {
    switch (type) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
            return "discrete";
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
            return "integrated";
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
            return "virtual";
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
            return "cpu";
        default:
            return "other";
    }
}

bool has_extension(const std::vector<VkExtensionProperties>& extensions, const char* name) {
    return std::any_of(extensions.begin(), extensions.end(),
                       [name](const auto& e) { return std::strcmp(e.extensionName, name) == 0; });
}

VulkanDeviceInfo describe(VkPhysicalDevice device, int index) {
    VulkanDeviceInfo d;
    d.index = index;
    auto driver = vulkan::vk_struct<VkPhysicalDeviceDriverProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES);
    auto subgroup = vulkan::vk_struct<VkPhysicalDeviceSubgroupProperties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES);
    subgroup.pNext = &driver;
    auto maintenance3 = vulkan::vk_struct<VkPhysicalDeviceMaintenance3Properties>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES);
    maintenance3.pNext = &subgroup;
    auto props = vulkan::vk_struct<VkPhysicalDeviceProperties2>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
    props.pNext = &maintenance3;
    vkGetPhysicalDeviceProperties2(device, &props);
    d.name = props.properties.deviceName;
    d.type = device_type(props.properties.deviceType);
    d.api_version = props.properties.apiVersion;
    d.vendor_id = props.properties.vendorID;
    d.driver = concat(driver.driverName, " ", driver.driverInfo);
    while (!d.driver.empty() && d.driver.back() == ' ') d.driver.pop_back();
    d.subgroup_size = subgroup.subgroupSize;
    d.max_storage_buffer_bytes = props.properties.limits.maxStorageBufferRange;

    VkPhysicalDeviceMemoryProperties memory;
    vkGetPhysicalDeviceMemoryProperties(device, &memory);
    for (uint32_t h = 0; h < memory.memoryHeapCount; ++h) {
        if (memory.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
            d.device_local_bytes =
                std::max<uint64_t>(d.device_local_bytes, memory.memoryHeaps[h].size);
    }

    auto f11 = vulkan::vk_struct<VkPhysicalDeviceVulkan11Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
    auto f12 = vulkan::vk_struct<VkPhysicalDeviceVulkan12Features>(
        VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
    f11.pNext = &f12;
    auto features =
        vulkan::vk_struct<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
    features.pNext = &f11;
    vkGetPhysicalDeviceFeatures2(device, &features);
    d.float16 = f12.shaderFloat16 == VK_TRUE;
    d.int8 = f12.shaderInt8 == VK_TRUE;
    d.storage_16bit = f11.storageBuffer16BitAccess == VK_TRUE;
    d.storage_8bit = f12.storageBuffer8BitAccess == VK_TRUE;

    uint32_t n = 0;
    vkEnumerateDeviceExtensionProperties(device, nullptr, &n, nullptr);
    std::vector<VkExtensionProperties> extensions(n);
    vkEnumerateDeviceExtensionProperties(device, nullptr, &n, extensions.data());
    d.integer_dot_product = has_extension(extensions, "VK_KHR_shader_integer_dot_product") ||
                            d.api_version >= VK_API_VERSION_1_3;
    d.cooperative_matrix_khr = has_extension(extensions, "VK_KHR_cooperative_matrix");
    d.cooperative_matrix_nv = has_extension(extensions, "VK_NV_cooperative_matrix");
    d.external_memory_host = has_extension(extensions, "VK_EXT_external_memory_host");
    return d;
}

}  // namespace

VulkanDeviceList list_vulkan_devices() {
    VulkanDeviceList list;
    std::shared_ptr<vulkan::Instance> instance;
    try {
        instance = vulkan::Instance::shared();
    } catch (const Error& e) {
        list.unavailable = e.what();
        return list;
    }
    const std::vector<VkPhysicalDevice> devices = vulkan::usable_physical_devices(instance->get());
    for (std::size_t i = 0; i < devices.size(); ++i)
        list.devices.push_back(describe(devices[i], static_cast<int>(i)));
    if (list.devices.empty()) {
        list.unavailable =
            "no Vulkan 1.2 device: install a GPU's Vulkan driver, or "
            "mesa-vulkan-drivers for Mesa's CPU device lavapipe";
    }
    return list;
}

namespace vulkan {

std::vector<VkPhysicalDevice> usable_physical_devices(VkInstance instance) {
    uint32_t n = 0;
    if (vkEnumeratePhysicalDevices(instance, &n, nullptr) != VK_SUCCESS || n == 0) return {};
    std::vector<VkPhysicalDevice> all(n), usable;
    if (vkEnumeratePhysicalDevices(instance, &n, all.data()) != VK_SUCCESS) return {};
    for (VkPhysicalDevice d : all) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(d, &p);
        // Vulkan 1.2 is the floor: its features structs tell fp16/int8 and 8/16-bit storage.
        if (p.apiVersion >= VK_API_VERSION_1_2) usable.push_back(d);
    }
    return usable;
}

}  // namespace vulkan

bool vulkan_built() {
    return true;
}

}  // namespace minfer
