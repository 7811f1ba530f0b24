#pragma once
// The Vulkan devices of this machine, as `minfer --list-devices` shows them and `--device
// vulkan:N` will pick them. The Vulkan loader (libvulkan.so.1) is opened at run time (volk), so
// minfer starts and runs on the CPU on a machine without it; a machine without a loader or a
// driver has no Vulkan devices, and list_vulkan_devices says why.

#include <cstdint>
#include <string>
#include <vector>

namespace minfer {

struct VulkanDeviceInfo {
    int index = 0;       // N of vulkan:N, in the order the loader enumerates them
    std::string name;    // "NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)"
    std::string type;    // "discrete", "integrated", "virtual", "cpu", "other"
    std::string driver;  // "NVIDIA 580.159.4", "llvmpipe Mesa 22.3.6"
    uint32_t api_version = 0;
    uint32_t vendor_id = 0;
    uint64_t device_local_bytes = 0;  // the largest device-local memory heap
    uint32_t subgroup_size = 0;
    uint64_t max_storage_buffer_bytes = 0;  // the largest storage buffer one binding may view
    // What the faster shader paths need (docs/vulkan.md says which path each enables).
    bool float16 = false;                 // shaderFloat16
    bool int8 = false;                    // shaderInt8
    bool storage_16bit = false;           // storageBuffer16BitAccess
    bool storage_8bit = false;            // storageBuffer8BitAccess
    bool integer_dot_product = false;     // VK_KHR_shader_integer_dot_product
    bool cooperative_matrix_khr = false;  // VK_KHR_cooperative_matrix
    bool cooperative_matrix_nv = false;   // VK_NV_cooperative_matrix
    bool external_memory_host = false;    // VK_EXT_external_memory_host (map the file itself)

    bool is_cpu() const { return type == "cpu"; }
    // "Vulkan 1.3"
    std::string api() const;
    // "fp16 int8 int-dot coopmat-nv host-memory": the optional features present.
    std::string features() const;
};

struct VulkanDeviceList {
    std::vector<VulkanDeviceInfo> devices;
    std::string unavailable;  // why there are none: no loader, no driver ("" when some are)
};

// Opens the loader, makes an instance and enumerates its physical devices. Never throws for a
// machine without Vulkan: the list is empty and `unavailable` says why.
VulkanDeviceList list_vulkan_devices();

// Whether this build has the Vulkan backend (CMake found the Vulkan headers and glslc).
bool vulkan_built();

}  // namespace minfer
