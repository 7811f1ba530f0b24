#include "backend/vulkan/vulkan_context.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "core/error.h"

namespace minfer::vulkan {

// ---- Buffer ----

Buffer& Buffer::operator=(Buffer&& other) noexcept {
    if (this != &other) {
        release();
        device_ = std::exchange(other.device_, VK_NULL_HANDLE);
        buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
        memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
        mapped_ = std::exchange(other.mapped_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
        binding_offset_ = std::exchange(other.binding_offset_, 0);
        id_ = std::exchange(other.id_, 0);
        device_bytes_ = std::exchange(other.device_bytes_, nullptr);
    }
    return *this;
}

Buffer::~Buffer() {
    release();
}

void Buffer::release() {
    if (device_ == VK_NULL_HANDLE) return;
    if (mapped_ != nullptr) vkUnmapMemory(device_, memory_);
    if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, buffer_, nullptr);
    if (memory_ != VK_NULL_HANDLE) vkFreeMemory(device_, memory_, nullptr);
    if (device_bytes_ != nullptr) *device_bytes_ -= bytes_;
    device_bytes_ = nullptr;
    device_ = VK_NULL_HANDLE;
    buffer_ = VK_NULL_HANDLE;
    memory_ = VK_NULL_HANDLE;
    mapped_ = nullptr;
    binding_offset_ = 0;
    id_ = 0;
}

namespace {
uint64_t next_buffer_id() {
    static std::atomic<uint64_t> last{0};
    return ++last;
}
}  // namespace

// ---- Pipeline ----

Pipeline& Pipeline::operator=(Pipeline&& other) noexcept {
    if (this != &other) {
        release();
        device_ = std::exchange(other.device_, VK_NULL_HANDLE);
        set_layout_ = std::exchange(other.set_layout_, VK_NULL_HANDLE);
        layout_ = std::exchange(other.layout_, VK_NULL_HANDLE);
        pipeline_ = std::exchange(other.pipeline_, VK_NULL_HANDLE);
        n_buffers_ = other.n_buffers_;
        push_bytes_ = other.push_bytes_;
    }
    return *this;
}

Pipeline::~Pipeline() {
    release();
}

void Pipeline::release() {
    if (device_ == VK_NULL_HANDLE) return;
    if (pipeline_ != VK_NULL_HANDLE) vkDestroyPipeline(device_, pipeline_, nullptr);
    if (layout_ != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, layout_, nullptr);
    if (set_layout_ != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device_, set_layout_, nullptr);
    device_ = VK_NULL_HANDLE;
}

// ---- TimestampPool ----

TimestampPool& TimestampPool::operator=(TimestampPool&& other) noexcept {
    if (this != &other) {
        release();
        device_ = std::exchange(other.device_, VK_NULL_HANDLE);
        pool_ = std::exchange(other.pool_, VK_NULL_HANDLE);
        count_ = std::exchange(other.count_, 0);
        period_ns_ = other.period_ns_;
    }
    return *this;
}

TimestampPool::~TimestampPool() {
    release();
}

void TimestampPool::release() {
    if (pool_ != VK_NULL_HANDLE) vkDestroyQueryPool(device_, pool_, nullptr);
    pool_ = VK_NULL_HANDLE;
}

std::vector<double> TimestampPool::read_ns(uint32_t n) const {
    std::vector<uint64_t> ticks(n);
    if (n == 0 || n > count_) return {};
    check(vkGetQueryPoolResults(device_, pool_, 0, n, n * sizeof(uint64_t), ticks.data(),
                                sizeof(uint64_t), VK_QUERY_RESULT_64_BIT),
          "vkGetQueryPoolResults");
    std::vector<double> ns(n);
    for (uint32_t i = 0; i < n; ++i) ns[i] = static_cast<double>(ticks[i]) * period_ns_;
    return ns;
}

// ---- Context ----

std::shared_ptr<Context> Context::open(int index) {
    static std::mutex mutex;
    // Never destroyed, as the instance (vulkan_instance.h): the process's end reclaims them.
    static auto* open_contexts = new std::map<int, std::shared_ptr<Context>>();
    std::lock_guard lock(mutex);
    if (auto it = open_contexts->find(index); it != open_contexts->end()) return it->second;
    std::shared_ptr<Context> c(new Context());
    c->instance_ = Instance::shared();
    const std::vector<VkPhysicalDevice> devices = usable_physical_devices(c->instance_->get());
    if (index < 0 || static_cast<std::size_t>(index) >= devices.size()) {
        throw UnsupportedError(concat("no Vulkan device vulkan:", index, " (this machine has ",
                                      devices.size(), "; minfer --list-devices lists them)"));
    }
    c->physical_ = devices[static_cast<std::size_t>(index)];
    VulkanDeviceList list = list_vulkan_devices();
    if (static_cast<std::size_t>(index) < list.devices.size())
        c->info_ = list.devices[static_cast<std::size_t>(index)];
    vkGetPhysicalDeviceMemoryProperties(c->physical_, &c->memory_);
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(c->physical_, &props);
    std::copy_n(props.limits.maxComputeWorkGroupCount, 3, c->max_groups_);

    uint32_t n_families = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &n_families, nullptr);
    std::vector<VkQueueFamilyProperties> families(n_families);
    vkGetPhysicalDeviceQueueFamilyProperties(c->physical_, &n_families, families.data());
    uint32_t family = n_families;
    for (uint32_t f = 0; f < n_families && family == n_families; ++f) {
        if (families[f].queueFlags & VK_QUEUE_COMPUTE_BIT) family = f;
    }
    if (family == n_families)
        throw UnsupportedError(concat("Vulkan device ", c->info_.name, " has no compute queue"));

    const float priority = 1.0f;
    auto queue = vk_struct<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
    queue.queueFamilyIndex = family;
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    auto info = vk_struct<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    // Host memory imported as device memory (the mapped model file on a unified-memory device).
    const char* import_extension = "VK_EXT_external_memory_host";
    if (c->info_.external_memory_host) {
        info.enabledExtensionCount = 1;
        info.ppEnabledExtensionNames = &import_extension;
        auto host = vk_struct<VkPhysicalDeviceExternalMemoryHostPropertiesEXT>(
            VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT);
        auto props2 =
            vk_struct<VkPhysicalDeviceProperties2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2);
        props2.pNext = &host;
        vkGetPhysicalDeviceProperties2(c->physical_, &props2);
        c->import_alignment_ = host.minImportedHostPointerAlignment;
        c->min_binding_alignment_ =
            std::max<uint64_t>(1, props.limits.minStorageBufferOffsetAlignment);
    }
    check(vkCreateDevice(c->physical_, &info, nullptr, &c->device_), "vkCreateDevice");
    volkLoadDevice(c->device_);
    vkGetDeviceQueue(c->device_, family, 0, &c->queue_);
    c->queue_family_ = family;
    c->can_time_ = families[family].timestampValidBits > 0;
    c->timestamp_period_ = props.limits.timestampPeriod;

    auto pool = vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pool.queueFamilyIndex = family;
    check(vkCreateCommandPool(c->device_, &pool, nullptr, &c->command_pool_),
          "vkCreateCommandPool");
    auto fence = vk_struct<VkFenceCreateInfo>(VK_STRUCTURE_TYPE_FENCE_CREATE_INFO);
    check(vkCreateFence(c->device_, &fence, nullptr, &c->fence_), "vkCreateFence");
    (*open_contexts)[index] = c;
    return c;
}

namespace {

// `limit`, or the byte count in environment variable `name` when that is smaller (the tests'
// way to impose a small device).
uint64_t at_most_environment(uint64_t limit, const char* name) {
    if (const char* env = std::getenv(name)) {
        const uint64_t b = std::strtoull(env, nullptr, 10);
        if (b > 0) limit = std::min(limit, b);
    }
    return limit;
}

}  // namespace

uint64_t Context::memory_budget() const {
    return at_most_environment(info_.device_local_bytes, "MINFER_VULKAN_MEMORY_BUDGET");
}

uint64_t Context::weight_binding_limit() const {
    return at_most_environment(info_.max_storage_buffer_bytes, "MINFER_VULKAN_MAX_BINDING");
}

TransferStats Context::stats() const {
    std::lock_guard lock(mutex_);
    return stats_;
}

Context::~Context() {
    if (device_ == VK_NULL_HANDLE) return;
    vkDeviceWaitIdle(device_);
    pipelines_.clear();
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, command_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
}

uint32_t Context::memory_type(uint32_t allowed, VkMemoryPropertyFlags wanted) const {
    for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
        if ((allowed & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & wanted) == wanted)
            return i;
    }
    return UINT32_MAX;
}

Buffer Context::import_host(std::span<const std::byte> bytes) {
    const uint64_t align = import_alignment_;
    // Whole words only: a binding rounded up past the bytes could reach past the file's mapping.
    if (align == 0 || (align & (align - 1)) != 0 || bytes.empty() || bytes.size() % 4 != 0)
        return {};
    // The pages around the bytes are imported; the buffer starts at the bytes themselves.
    const auto address = reinterpret_cast<uintptr_t>(bytes.data());
    const uintptr_t begin = address & ~uintptr_t{align - 1};
    const uint64_t size = (bytes.size() + 3) & ~uint64_t{3};
    const uintptr_t end = (address + size + align - 1) & ~uintptr_t{align - 1};
    const uint64_t offset = address - begin;
    auto external = vk_struct<VkExternalMemoryBufferCreateInfo>(
        VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO);
    external.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    auto info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    info.pNext = &external;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    // The buffer is bound where the memory's alignment allows, at or before the bytes; the
    // binding starts `lead` bytes in (a multiple of minStorageBufferOffsetAlignment: GGUF's
    // tensors are 32-byte aligned, a buffer's memory often 64).
    VkMemoryRequirements needs{};
    uint64_t lead = 0;
    Buffer b;
    b.device_ = device_;
    b.bytes_ = size;
    b.id_ = next_buffer_id();
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (b.buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(device_, b.buffer_, nullptr);
        b.buffer_ = VK_NULL_HANDLE;
        info.size = size + lead;
        if (vkCreateBuffer(device_, &info, nullptr, &b.buffer_) != VK_SUCCESS) return {};
        vkGetBufferMemoryRequirements(device_, b.buffer_, &needs);
        if (needs.alignment == 0) return {};
        if (offset % needs.alignment == lead) break;
        lead = offset % needs.alignment;
    }
    if (offset % needs.alignment != lead || lead % min_binding_alignment_ != 0 ||
        offset - lead + needs.size > end - begin)
        return {};
    b.binding_offset_ = lead;
    auto host = vk_struct<VkMemoryHostPointerPropertiesEXT>(
        VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT);
    // The file is mapped read-only; a buffer only the shaders read (declared readonly) never
    // writes through the pointer.
    void* pages = reinterpret_cast<void*>(begin);
    if (vkGetMemoryHostPointerPropertiesEXT(device_,
                                            VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                            pages, &host) != VK_SUCCESS)
        return {};
    const uint32_t type = memory_type(needs.memoryTypeBits & host.memoryTypeBits, 0);
    if (type == UINT32_MAX) return {};
    auto import = vk_struct<VkImportMemoryHostPointerInfoEXT>(
        VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT);
    import.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT;
    import.pHostPointer = pages;
    auto alloc = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    alloc.pNext = &import;
    alloc.allocationSize = end - begin;
    alloc.memoryTypeIndex = type;
    if (vkAllocateMemory(device_, &alloc, nullptr, &b.memory_) != VK_SUCCESS) return {};
    if (vkBindBufferMemory(device_, b.buffer_, b.memory_, offset - lead) != VK_SUCCESS) return {};
    return b;
}

Buffer Context::make_buffer(uint64_t bytes, bool host_visible) {
    // Whole 32-bit words: the shaders read GGUF blocks (whose sizes need not be multiples of 4)
    // as words, and a word reaching past the end of a binding is undefined.
    bytes = (std::max<uint64_t>(bytes, 4) + 3) & ~uint64_t{3};
    if (bytes > info_.max_storage_buffer_bytes && !host_visible) {
        throw LimitError(concat("a Vulkan buffer of ", bytes, " bytes is beyond what ", info_.name,
                                " binds at once (", info_.max_storage_buffer_bytes, " bytes)"));
    }
    const uint64_t budget = memory_budget(), used = device_bytes();
    if (!host_visible && bytes > budget - std::min(budget, used)) {
        throw LimitError(concat("Vulkan device ", info_.name, " has no room for ", bytes,
                                " more bytes: ", used, " of its ", budget, " are in use"));
    }
    Buffer b;
    b.device_ = device_;
    b.bytes_ = bytes;
    b.id_ = next_buffer_id();
    auto info = vk_struct<VkBufferCreateInfo>(VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO);
    info.size = bytes;
    info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                 VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
    check(vkCreateBuffer(device_, &info, nullptr, &b.buffer_), "vkCreateBuffer");
    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(device_, b.buffer_, &needs);
    const VkMemoryPropertyFlags wanted =
        host_visible ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                     : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    const uint32_t type = memory_type(needs.memoryTypeBits, wanted);
    if (type == UINT32_MAX)
        throw UnsupportedError(concat("Vulkan device ", info_.name, " has no ",
                                      host_visible ? "host-visible" : "device-local",
                                      " memory for storage buffers"));
    auto alloc = vk_struct<VkMemoryAllocateInfo>(VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO);
    alloc.allocationSize = needs.size;
    alloc.memoryTypeIndex = type;
    const VkResult made = vkAllocateMemory(device_, &alloc, nullptr, &b.memory_);
    if (made == VK_ERROR_OUT_OF_DEVICE_MEMORY || made == VK_ERROR_OUT_OF_HOST_MEMORY) {
        throw LimitError(concat("Vulkan device ", info_.name, " has no room for ", bytes,
                                " more bytes (", result_name(made),
                                "; its memory: ", info_.device_local_bytes, " bytes)"));
    }
    check(made, "vkAllocateMemory");
    check(vkBindBufferMemory(device_, b.buffer_, b.memory_, 0), "vkBindBufferMemory");
    if (!host_visible) {
        device_bytes_ += bytes;
        b.device_bytes_ = &device_bytes_;
    }
    if (host_visible)
        check(vkMapMemory(device_, b.memory_, 0, bytes, 0, &b.mapped_), "vkMapMemory");
    return b;
}

Buffer Context::device_buffer(uint64_t bytes) {
    return make_buffer(bytes, false);
}

Buffer Context::host_buffer(uint64_t bytes) {
    return make_buffer(bytes, true);
}

void Context::copy(const Buffer& from, const Buffer& to, uint64_t bytes, uint64_t from_offset,
                   uint64_t to_offset) {
    if (from_offset > from.bytes() || bytes > from.bytes() - from_offset ||
        to_offset > to.bytes() || bytes > to.bytes() - to_offset)
        throw UsageError(concat("Vulkan copy of ", bytes, " bytes beyond a buffer"));
    if (bytes > 0)
        run_copy(from.get(), to.get(), from.binding_offset() + from_offset,
                 to.binding_offset() + to_offset, bytes);
}

void Context::submit(VkCommandBuffer commands, uint64_t dispatches, bool recorded) {
    std::lock_guard lock(mutex_);
    submit_locked(commands);
    stats_.dispatches += dispatches;
    if (recorded) ++stats_.recordings;
}

void Context::submit_locked(VkCommandBuffer commands) {
    auto submit = vk_struct<VkSubmitInfo>(VK_STRUCTURE_TYPE_SUBMIT_INFO);
    submit.commandBufferCount = 1;
    submit.pCommandBuffers = &commands;
    check(vkResetFences(device_, 1, &fence_), "vkResetFences");
    check(vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
    ++stats_.submissions;
    // A device that stops answering is lost, not waited for forever: 60 s is beyond any one
    // forward pass of a model that fits.
    constexpr uint64_t kTimeoutNs = uint64_t{60} * 1000 * 1000 * 1000;
    const VkResult waited = vkWaitForFences(device_, 1, &fence_, VK_TRUE, kTimeoutNs);
    ++stats_.host_waits;
    if (waited == VK_TIMEOUT)
        throw IoError(concat("Vulkan device ", info_.name, " did not finish within 60 s"));
    check(waited, "vkWaitForFences");
}

void Context::run_copy(VkBuffer from, VkBuffer to, uint64_t src_offset, uint64_t dst_offset,
                       uint64_t bytes) {
    std::lock_guard lock(mutex_);
    auto alloc =
        vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    alloc.commandPool = command_pool_;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    check(vkAllocateCommandBuffers(device_, &alloc, &cb), "vkAllocateCommandBuffers");
    auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    try {
        check(vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
        const VkBufferCopy region{src_offset, dst_offset, bytes};
        vkCmdCopyBuffer(cb, from, to, 1, &region);
        check(vkEndCommandBuffer(cb), "vkEndCommandBuffer");
        submit_locked(cb);
    } catch (...) {
        vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
        throw;
    }
    vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
}

void Context::upload(Buffer& dst, std::span<const std::byte> bytes, uint64_t offset) {
    if (offset > dst.bytes() || bytes.size() > dst.bytes() - offset)
        throw UsageError(concat("Vulkan upload of ", bytes.size(), " bytes at ", offset,
                                " beyond a buffer of ", dst.bytes()));
    if (bytes.empty()) return;
    Buffer staging = make_buffer(bytes.size(), true);
    std::memcpy(staging.mapped_, bytes.data(), bytes.size());
    run_copy(staging.get(), dst.get(), 0, dst.binding_offset() + offset, bytes.size());
    std::lock_guard lock(mutex_);
    stats_.bytes_up += bytes.size();
}

void Context::download(const Buffer& src, std::span<std::byte> out, uint64_t offset) {
    if (offset > src.bytes() || out.size() > src.bytes() - offset)
        throw UsageError(concat("Vulkan read-back of ", out.size(), " bytes at ", offset,
                                " beyond a buffer of ", src.bytes()));
    if (out.empty()) return;
    Buffer staging = make_buffer(out.size(), true);
    run_copy(src.get(), staging.get(), src.binding_offset() + offset, 0, out.size());
    std::memcpy(out.data(), staging.mapped_, out.size());
    std::lock_guard lock(mutex_);
    stats_.bytes_down += out.size();
}

const Pipeline& Context::shared_pipeline(const std::string& name, std::span<const uint32_t> spirv,
                                         uint32_t n_buffers, uint32_t push_bytes) {
    std::lock_guard lock(pipelines_mutex_);
    auto it = pipelines_.find(name);
    if (it == pipelines_.end()) {
        it = pipelines_
                 .emplace(name, std::make_unique<Pipeline>(pipeline(spirv, n_buffers, push_bytes)))
                 .first;
    }
    return *it->second;
}

Pipeline Context::pipeline(std::span<const uint32_t> spirv, uint32_t n_buffers,
                           uint32_t push_bytes) {
    Pipeline p;
    p.device_ = device_;
    p.n_buffers_ = n_buffers;
    p.push_bytes_ = push_bytes;
    std::vector<VkDescriptorSetLayoutBinding> bindings(n_buffers);
    for (uint32_t i = 0; i < n_buffers; ++i) {
        bindings[i].binding = i;
        bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        bindings[i].descriptorCount = 1;
        bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    auto set = vk_struct<VkDescriptorSetLayoutCreateInfo>(
        VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    set.bindingCount = n_buffers;
    set.pBindings = bindings.data();
    check(vkCreateDescriptorSetLayout(device_, &set, nullptr, &p.set_layout_),
          "vkCreateDescriptorSetLayout");
    const VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
    auto layout =
        vk_struct<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &p.set_layout_;
    layout.pushConstantRangeCount = push_bytes > 0 ? 1 : 0;
    layout.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout_), "vkCreatePipelineLayout");

    auto module_info =
        vk_struct<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
    module_info.codeSize = spirv.size_bytes();
    module_info.pCode = spirv.data();
    VkShaderModule module = VK_NULL_HANDLE;
    check(vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule");
    auto info =
        vk_struct<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
    info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    info.stage.module = module;
    info.stage.pName = "main";
    info.layout = p.layout_;
    const VkResult made =
        vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &p.pipeline_);
    vkDestroyShaderModule(device_, module, nullptr);
    check(made, "vkCreateComputePipelines");
    return p;
}

TimestampPool Context::timestamps(uint32_t count) {
    TimestampPool p;
    if (!can_time_ || count == 0) return p;
    auto info = vk_struct<VkQueryPoolCreateInfo>(VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO);
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = count;
    check(vkCreateQueryPool(device_, &info, nullptr, &p.pool_), "vkCreateQueryPool");
    p.device_ = device_;
    p.count_ = count;
    p.period_ns_ = timestamp_period_;
    return p;
}

}  // namespace minfer::vulkan
