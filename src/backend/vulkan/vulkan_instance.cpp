#include "backend/vulkan/vulkan_instance.h"

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace minfer::vulkan {
namespace {

// volkInitialize opens the loader once for the process.
VkResult load_loader() {
    static std::once_flag once;
    static VkResult result = VK_SUCCESS;
    std::call_once(once, [] { result = volkInitialize(); });
    return result;
}

bool has_layer(const char* name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
    std::vector<VkLayerProperties> layers(n);
    if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
    for (const auto& l : layers) {
        if (std::strcmp(l.layerName, name) == 0) return true;
    }
    return false;
}

bool has_instance_extension(const char* name) {
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(nullptr, &n, nullptr) != VK_SUCCESS) return false;
    std::vector<VkExtensionProperties> extensions(n);
    if (vkEnumerateInstanceExtensionProperties(nullptr, &n, extensions.data()) != VK_SUCCESS)
        return false;
    for (const auto& e : extensions) {
        if (std::strcmp(e.extensionName, name) == 0) return true;
    }
    return false;
}

}  // namespace

const char* result_name(VkResult result) {
    switch (result) {
        case VK_SUCCESS:
            return "VK_SUCCESS";
        case VK_ERROR_OUT_OF_HOST_MEMORY:
            return "VK_ERROR_OUT_OF_HOST_MEMORY";
        case VK_ERROR_OUT_OF_DEVICE_MEMORY:
            return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
        case VK_ERROR_INITIALIZATION_FAILED:
            return "VK_ERROR_INITIALIZATION_FAILED";
        case VK_ERROR_DEVICE_LOST:
            return "VK_ERROR_DEVICE_LOST";
        case VK_ERROR_LAYER_NOT_PRESENT:
            return "VK_ERROR_LAYER_NOT_PRESENT";
        case VK_ERROR_EXTENSION_NOT_PRESENT:
            return "VK_ERROR_EXTENSION_NOT_PRESENT";
        case VK_ERROR_FEATURE_NOT_PRESENT:
            return "VK_ERROR_FEATURE_NOT_PRESENT";
        case VK_ERROR_INCOMPATIBLE_DRIVER:
            return "VK_ERROR_INCOMPATIBLE_DRIVER";
        case VK_ERROR_TOO_MANY_OBJECTS:
            return "VK_ERROR_TOO_MANY_OBJECTS";
        case VK_TIMEOUT:
            return "VK_TIMEOUT";
        default:
            return "VK_ERROR (other)";
    }
}

void check(VkResult result, const char* what) {
    if (result != VK_SUCCESS)
        throw IoError(concat("Vulkan: ", what, ": ", result_name(result), " (", result, ")"));
}

std::shared_ptr<Instance> Instance::shared() {
    static std::mutex mutex;
    // Never destroyed (see the header): the process's end reclaims it.
    static auto* current = new std::shared_ptr<Instance>();
    std::lock_guard lock(mutex);
    if (!*current) *current = create();
    return *current;
}

std::shared_ptr<Instance> Instance::create() {
    if (load_loader() != VK_SUCCESS)
        throw UnsupportedError("no Vulkan loader (libvulkan.so.1): install libvulkan1");
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion != nullptr) vkEnumerateInstanceVersion(&loader_version);
    if (loader_version < VK_API_VERSION_1_2)
        throw UnsupportedError("the Vulkan loader is older than Vulkan 1.2");

    std::shared_ptr<Instance> self(new Instance());
    auto app = vk_struct<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
    app.pApplicationName = "minfer";
    app.pEngineName = "minfer";
    app.apiVersion = VK_API_VERSION_1_2;
    std::vector<const char*> layers, extensions;
    const char* validation = std::getenv("MINFER_VULKAN_VALIDATION");
    const bool want_validation = validation != nullptr && std::strcmp(validation, "1") == 0;
    const bool validate = want_validation && has_layer("VK_LAYER_KHRONOS_validation") &&
                          has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (want_validation && !validate)
        throw UnsupportedError(
            "MINFER_VULKAN_VALIDATION=1 but the Khronos validation layer is not installed "
            "(vulkan-validationlayers)");
    if (validate) {
        layers.push_back("VK_LAYER_KHRONOS_validation");
        extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    }
    auto info = vk_struct<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
    info.pApplicationInfo = &app;
    info.enabledLayerCount = static_cast<uint32_t>(layers.size());
    info.ppEnabledLayerNames = layers.data();
    info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
    info.ppEnabledExtensionNames = extensions.data();
    const VkResult made = vkCreateInstance(&info, nullptr, &self->instance_);
    if (made != VK_SUCCESS)
        throw UnsupportedError(concat("no Vulkan instance: ", result_name(made)));
    volkLoadInstanceOnly(self->instance_);
    if (validate) {
        auto m = vk_struct<VkDebugUtilsMessengerCreateInfoEXT>(
            VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT);
        m.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                            VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
        m.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                        VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT;
        m.pfnUserCallback = &Instance::on_message;
        m.pUserData = self.get();
        check(vkCreateDebugUtilsMessengerEXT(self->instance_, &m, nullptr, &self->messenger_),
              "vkCreateDebugUtilsMessengerEXT");
    }
    return self;
}

Instance::~Instance() {
    if (messenger_ != VK_NULL_HANDLE)
        vkDestroyDebugUtilsMessengerEXT(instance_, messenger_, nullptr);
    if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

int Instance::validation_errors() const {
    std::lock_guard lock(mutex_);
    return errors_;
}

std::string Instance::first_validation_error() const {
    std::lock_guard lock(mutex_);
    return first_error_;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
    // Warnings are counted too: the validation layer's warnings in compute code are real misuse
    // (a missing barrier, a buffer bound beyond its size).
    (void)severity;
    auto* instance = static_cast<Instance*>(self);
    std::lock_guard lock(instance->mutex_);
    if (instance->errors_++ == 0)
        instance->first_error_ = data->pMessage != nullptr ? data->pMessage : "";
    return VK_FALSE;
}

}  // namespace minfer::vulkan
