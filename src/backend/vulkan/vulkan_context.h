#pragma once
// One Vulkan device opened for compute: its queue, buffers, compute pipelines built from the
// SPIR-V compiled into minfer (vulkan_shaders.h), and the queue a pass's command buffer is
// submitted to (vulkan_commands.h records it). It counts what the GPU backend must keep small and
// tests assert: queue submissions, dispatches, recordings, host waits, bytes uploaded and read
// back.
//
// Memory: weights and activations live in device-local buffers; uploads and read-backs go
// through host-visible staging buffers. On a device whose only memory is both (lavapipe,
// integrated GPUs) the staging copy is still made: the same code path on every device.

#include <volk.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/vulkan/vulkan_devices.h"
#include "backend/vulkan/vulkan_instance.h"

namespace minfer::vulkan {

class Commands;
class Context;

// A storage buffer (RAII). Moves, never copies.
class Buffer {
  public:
    Buffer() = default;
    Buffer(Buffer&& other) noexcept { *this = std::move(other); }
    Buffer& operator=(Buffer&& other) noexcept;
    ~Buffer();

    VkBuffer get() const { return buffer_; }
    uint64_t bytes() const { return bytes_; }
    // The host's view of a host-visible buffer (null for a device-local one).
    void* mapped() const { return mapped_; }
    // Where its bytes start in the VkBuffer (0 but for an imported one: see import_host); the
    // descriptors and copies add it.
    uint64_t binding_offset() const { return binding_offset_; }
    explicit operator bool() const { return buffer_ != VK_NULL_HANDLE; }
    // Unique to this buffer in the process (a handle may be reused once the buffer is gone):
    // what a recorded pass names it by (CommandCache).
    uint64_t id() const { return id_; }

  private:
    friend class Context;
    void release();  // frees what it holds; empty after
    VkDevice device_ = VK_NULL_HANDLE;
    VkBuffer buffer_ = VK_NULL_HANDLE;
    uint64_t id_ = 0;
    VkDeviceMemory memory_ = VK_NULL_HANDLE;
    void* mapped_ = nullptr;  // host-visible buffers only
    uint64_t bytes_ = 0;
    uint64_t binding_offset_ = 0;
    std::atomic<uint64_t>* device_bytes_ = nullptr;  // the context's count of device-local bytes
};

// A compute pipeline: one shader, `n_buffers` storage buffers at bindings 0.., `push_bytes` of
// push constants. Moves, never copies.
class Pipeline {
  public:
    Pipeline() = default;
    Pipeline(Pipeline&& other) noexcept { *this = std::move(other); }
    Pipeline& operator=(Pipeline&& other) noexcept;
    ~Pipeline();

  private:
    friend class Context;
    friend class Commands;
    void release();  // frees what it holds; empty after
    VkDevice device_ = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
    VkPipelineLayout layout_ = VK_NULL_HANDLE;
    VkPipeline pipeline_ = VK_NULL_HANDLE;
    uint32_t n_buffers_ = 0;
    uint32_t push_bytes_ = 0;
};

// GPU timestamps (RAII): `count` slots a recorder writes (Commands::timestamp) and the host reads
// after the submission's wait. Moves, never copies.
class TimestampPool {
  public:
    TimestampPool() = default;
    TimestampPool(TimestampPool&& other) noexcept { *this = std::move(other); }
    TimestampPool& operator=(TimestampPool&& other) noexcept;
    ~TimestampPool();

    uint32_t count() const { return count_; }
    // The first n timestamps in nanoseconds since an arbitrary origin (after the wait).
    std::vector<double> read_ns(uint32_t n) const;

  private:
    friend class Context;
    friend class Commands;
    void release();  // frees what it holds; empty after
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueryPool pool_ = VK_NULL_HANDLE;
    uint32_t count_ = 0;
    double period_ns_ = 1.0;  // nanoseconds a tick
};

// What the device did since it was opened.
struct TransferStats {
    uint64_t submissions = 0;  // vkQueueSubmit calls
    uint64_t dispatches = 0;   // dispatches submitted
    uint64_t recordings = 0;   // command buffers recorded (a CommandCache's reuse records none)
    uint64_t host_waits = 0;   // waits of the host for the device
    uint64_t bytes_up = 0;     // host -> device
    uint64_t bytes_down = 0;   // device -> host
};

class Context {
  public:
    // Opens vulkan:index, or returns the process's open context of it: one logical device per
    // physical one, kept until the process ends and shared by every backend on it (its queue
    // submissions serialized by a lock), for the reason Instance::shared() gives.
    // Throws UnsupportedError for a machine without Vulkan or without that device (naming the
    // devices there are).
    static std::shared_ptr<Context> open(int index);
    ~Context();
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

    const VulkanDeviceInfo& info() const { return info_; }
    const Instance& instance() const { return *instance_; }
    TransferStats stats() const;
    // Device-local bytes allocated now, and the most this context may allocate: the device's
    // largest device-local heap, or MINFER_VULKAN_MEMORY_BUDGET (bytes) when that is smaller (a
    // budget the tests impose to check what happens when a model does not fit).
    uint64_t device_bytes() const { return device_bytes_.load(); }
    uint64_t memory_budget() const;
    uint32_t max_groups_x() const { return max_groups_[0]; }
    // The most bytes of a weight one buffer holds: what one storage buffer binding may view
    // (maxStorageBufferRange; every device buffer is at most that large), or
    // MINFER_VULKAN_MAX_BINDING (bytes) when that is smaller (the tests' way to make every matrix
    // come in windows of rows).
    uint64_t weight_binding_limit() const;

    // A device-local storage buffer of `bytes` (at least 4). Throws LimitError naming the size
    // and the device's memory when it does not fit.
    Buffer device_buffer(uint64_t bytes);
    // A host-visible, coherent buffer the host writes and reads through mapped() (inputs the
    // shaders read each pass, results read back) without a copy of its own.
    Buffer host_buffer(uint64_t bytes);
    // Whether import_host can view host memory in place (VK_EXT_external_memory_host).
    bool can_import_host() const { return import_alignment_ != 0; }
    // A buffer viewing `bytes` in place (the pages around them imported as device memory; not
    // counted in device_bytes()), or an empty Buffer where the device cannot (no import, the
    // bytes' alignment, no memory type for them): the caller copies then. The bytes must outlive
    // the buffer.
    Buffer import_host(std::span<const std::byte> bytes);
    // Copies bytes between two buffers now (one submission, one wait).
    void copy(const Buffer& from, const Buffer& to, uint64_t bytes, uint64_t from_offset,
              uint64_t to_offset);
    // host -> device (through a staging buffer; waits for the copy).
    void upload(Buffer& dst, std::span<const std::byte> bytes, uint64_t offset = 0);
    // device -> host (through a staging buffer; waits for the copy).
    void download(const Buffer& src, std::span<std::byte> out, uint64_t offset = 0);

    Pipeline pipeline(std::span<const uint32_t> spirv, uint32_t n_buffers, uint32_t push_bytes);
    // The pipeline of shader `name` (built from spirv on first use), kept with the context and
    // shared by every backend on the device: a model loaded after another compiles no shader,
    // and what a driver keeps of each compilation (lavapipe's LLVM code) is made once.
    const Pipeline& shared_pipeline(const std::string& name, std::span<const uint32_t> spirv,
                                    uint32_t n_buffers, uint32_t push_bytes);
    // A pool of `count` timestamps, or an empty one (count() 0) where the queue cannot time.
    TimestampPool timestamps(uint32_t count);

  private:
    friend class Commands;
    Context() = default;
    Buffer make_buffer(uint64_t bytes, bool host_visible);
    uint32_t memory_type(uint32_t allowed, VkMemoryPropertyFlags wanted) const;
    void run_copy(VkBuffer from, VkBuffer to, uint64_t src_offset, uint64_t dst_offset,
                  uint64_t bytes);
    // Takes the lock; `dispatches` (those in `commands`) and `recorded` (whether it was recorded
    // for this submission) for stats_.
    void submit(VkCommandBuffer commands, uint64_t dispatches, bool recorded);
    void submit_locked(VkCommandBuffer commands);  // with the lock held

    std::shared_ptr<Instance> instance_;
    VulkanDeviceInfo info_;
    VkPhysicalDevice physical_ = VK_NULL_HANDLE;
    VkPhysicalDeviceMemoryProperties memory_{};
    VkDevice device_ = VK_NULL_HANDLE;
    VkQueue queue_ = VK_NULL_HANDLE;
    VkCommandPool command_pool_ = VK_NULL_HANDLE;  // run_copy's, under the lock
    uint32_t queue_family_ = 0;
    bool can_time_ = false;        // the queue's timestamps have valid bits
    double timestamp_period_ = 1;  // nanoseconds a tick
    VkFence fence_ = VK_NULL_HANDLE;
    uint32_t max_groups_[3] = {};
    uint64_t import_alignment_ = 0;       // minImportedHostPointerAlignment; 0: no import
    uint64_t min_binding_alignment_ = 1;  // minStorageBufferOffsetAlignment
    TransferStats stats_;
    std::atomic<uint64_t> device_bytes_{0};
    mutable std::mutex mutex_;  // the queue, the fence, run_copy's command pool, stats_
    std::mutex pipelines_mutex_;
    std::unordered_map<std::string, std::unique_ptr<Pipeline>> pipelines_;  // by shader name
};

}  // namespace minfer::vulkan
