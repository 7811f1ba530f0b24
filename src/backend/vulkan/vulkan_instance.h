#pragma once
// A Vulkan instance (RAII) over the loader volk opened at run time, with the Khronos validation
// layer when MINFER_VULKAN_VALIDATION=1 and the layer is installed: its errors are counted (tests
// assert none) and the first of them kept for the message.

#include <volk.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace minfer::vulkan {

class Instance {
  public:
    // The process's instance, made on first use and kept until the process ends: one instance
    // for the device list and every device opened. (NVIDIA's driver 580 on the H200 refused new
    // instances, VK_ERROR_INCOMPATIBLE_DRIVER, after a dozen made and destroyed in one process,
    // and crashed when one was destroyed by the process's static destructors: so it never is.)
    // Throws UnsupportedError naming what is missing (no loader, no instance); a failure is not
    // kept, the next call tries again.
    static std::shared_ptr<Instance> shared();
    ~Instance();
    Instance(const Instance&) = delete;
    Instance& operator=(const Instance&) = delete;

    VkInstance get() const { return instance_; }
    bool validation() const { return messenger_ != VK_NULL_HANDLE; }
    // Errors the validation layer reported so far, and the first one's text.
    int validation_errors() const;
    std::string first_validation_error() const;

  private:
    Instance() = default;
    static std::shared_ptr<Instance> create();
    static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(
        VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
        const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

    VkInstance instance_ = VK_NULL_HANDLE;
    VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
    mutable std::mutex mutex_;  // the callback runs on the threads that call Vulkan
    int errors_ = 0;
    std::string first_error_;
};

// The physical devices minfer can use (Vulkan 1.2 or later), in the loader's order: vulkan:N is
// the N-th of them.
std::vector<VkPhysicalDevice> usable_physical_devices(VkInstance instance);

// A Vulkan info struct of type T, zeroed, with its sType.
template <class T>
T vk_struct(VkStructureType type) {
    T s{};
    s.sType = type;
    return s;
}

// Throws IoError "what: VK_ERROR_..." for a failed call (a lost device, memory exhausted).
void check(VkResult result, const char* what);
const char* result_name(VkResult result);

}  // namespace minfer::vulkan
