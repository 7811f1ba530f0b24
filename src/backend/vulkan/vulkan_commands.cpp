#include "backend/vulkan/vulkan_commands.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

#include "core/error.h"

namespace minfer::vulkan {
namespace {

// Each dispatch takes one descriptor set of at most kMaxBindings storage buffers, and at most
// kMaxPushBytes of push constants (what every Vulkan device offers).
constexpr uint32_t kMaxBindings = 8;
constexpr std::size_t kMaxPushBytes = 128;

// The encoding of a pass's commands, each a tag and its operands as 64-bit words:
//   kDispatch   pipeline, n, n x (VkBuffer, buffer id, binding offset), push bytes, the push
//               constants (8 bytes a word, zero-padded), groups x, y, z
//   kBarrier    (nothing)
//   kReset      VkQueryPool, n
//   kTimestamp  VkQueryPool, i
//   kCopy       from VkBuffer, from id, to VkBuffer, to id, from offset, to offset, bytes
// (offsets within the VkBuffers, binding offsets included). Buffers are named by their ids too,
// so that a pass naming a freed buffer whose handle was reused never matches.
enum Tag : uint64_t { kDispatch = 1, kBarrier, kReset, kTimestamp, kCopy };

// Handles and pointers as words and back (Vulkan's non-dispatchable handles are 64 bits).
template <class T>
uint64_t word(T handle) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<uintptr_t>(handle);
    } else {
        return static_cast<uint64_t>(handle);
    }
}
template <class T>
T as(uint64_t w) {
    if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<T>(static_cast<uintptr_t>(w));
    } else {
        return static_cast<T>(w);
    }
}

uint64_t fnv1a(const std::vector<uint64_t>& words) {
    uint64_t h = 1469598103934665603ull;
    for (const uint64_t w : words) h = (h ^ w) * 1099511628211ull;
    return h;
}

void barrier_between(VkCommandBuffer commands, VkPipelineStageFlags from_stage,
                     VkAccessFlags from_access, VkPipelineStageFlags to_stage,
                     VkAccessFlags to_access) {
    auto b = vk_struct<VkMemoryBarrier>(VK_STRUCTURE_TYPE_MEMORY_BARRIER);
    b.srcAccessMask = from_access;
    b.dstAccessMask = to_access;
    vkCmdPipelineBarrier(commands, from_stage, to_stage, 0, 1, &b, 0, nullptr, 0, nullptr);
}

}  // namespace

// ---- RecordedPass ----

RecordedPass::RecordedPass(RecordedPass&& other) noexcept
    : words(std::move(other.words)),
      hash(other.hash),
      last_used(other.last_used),
      device(other.device),
      command_pool(std::exchange(other.command_pool, VK_NULL_HANDLE)),
      descriptor_pool(std::exchange(other.descriptor_pool, VK_NULL_HANDLE)),
      commands(std::exchange(other.commands, VK_NULL_HANDLE)) {}

RecordedPass::~RecordedPass() {
    // Its command buffer is done (the host waited for it) or was never submitted (an exception
    // while recording): destroying the pool frees it.
    if (command_pool != VK_NULL_HANDLE) vkDestroyCommandPool(device, command_pool, nullptr);
    if (descriptor_pool != VK_NULL_HANDLE)
        vkDestroyDescriptorPool(device, descriptor_pool, nullptr);
}

// ---- CommandCache ----

const RecordedPass* CommandCache::find(const std::vector<uint64_t>& words, uint64_t hash) {
    for (const auto& pass : kept_) {
        if (pass->hash == hash && pass->words == words) {
            pass->last_used = ++clock_;
            return pass.get();
        }
    }
    return nullptr;
}

const RecordedPass* CommandCache::keep(RecordedPass pass) {
    if (kept_.size() >= capacity_) {
        kept_.erase(std::min_element(kept_.begin(), kept_.end(), [](const auto& a, const auto& b) {
            return a->last_used < b->last_used;
        }));
    }
    pass.last_used = ++clock_;
    kept_.push_back(std::make_unique<RecordedPass>(std::move(pass)));
    return kept_.back().get();
}

// ---- Commands ----

void Commands::dispatch(const Pipeline& pipeline, std::span<const Buffer* const> buffers,
                        std::span<const std::byte> push, uint32_t groups_x, uint32_t groups_y,
                        uint32_t groups_z) {
    if (buffers.size() != pipeline.n_buffers_ || push.size() != pipeline.push_bytes_ ||
        buffers.size() > kMaxBindings || push.size() > kMaxPushBytes)
        throw UsageError(concat("Vulkan dispatch: ", buffers.size(), " buffers and ", push.size(),
                                " push bytes for a pipeline of ", pipeline.n_buffers_, " and ",
                                pipeline.push_bytes_));
    const uint32_t* limits = context_.max_groups_;
    if (groups_x > limits[0] || groups_y > limits[1] || groups_z > limits[2])
        throw UsageError(concat("Vulkan dispatch of ", groups_x, " x ", groups_y, " x ", groups_z,
                                " workgroups beyond the device's limits"));
    words_.push_back(kDispatch);
    words_.push_back(word(&pipeline));
    words_.push_back(buffers.size());
    for (const Buffer* b : buffers)
        words_.insert(words_.end(), {word(b->get()), b->id(), b->binding_offset()});
    words_.push_back(push.size());
    const std::size_t at = words_.size();
    words_.resize(at + (push.size() + 7) / 8, 0);
    if (!push.empty()) std::memcpy(&words_[at], push.data(), push.size());
    words_.insert(words_.end(), {groups_x, groups_y, groups_z});
    ++dispatches_;
}

void Commands::barrier() {
    words_.push_back(kBarrier);
}

void Commands::reset(const TimestampPool& pool, uint32_t n) {
    if (n > pool.count_) throw UsageError("Vulkan: more timestamps than the pool holds");
    if (n > 0) words_.insert(words_.end(), {kReset, word(pool.pool_), n});
}

void Commands::timestamp(const TimestampPool& pool, uint32_t i) {
    if (i >= pool.count_) throw UsageError("Vulkan: a timestamp beyond the pool");
    words_.insert(words_.end(), {kTimestamp, word(pool.pool_), i});
}

void Commands::copy(const Buffer& from, const Buffer& to, uint64_t bytes, uint64_t from_offset,
                    uint64_t to_offset) {
    if (from_offset > from.bytes() || bytes > from.bytes() - from_offset ||
        to_offset > to.bytes() || bytes > to.bytes() - to_offset)
        throw UsageError(concat("Vulkan copy of ", bytes, " bytes beyond a buffer"));
    words_.insert(words_.end(),
                  {kCopy, word(from.get()), from.id(), word(to.get()), to.id(),
                   from.binding_offset() + from_offset, to.binding_offset() + to_offset, bytes});
}

void Commands::submit_and_wait(CommandCache* cache) {
    if (submitted_) throw UsageError("Vulkan commands submitted twice");
    submitted_ = true;
    if (cache == nullptr) {
        const RecordedPass once = record(true);
        context_.submit(once.commands, dispatches_, true);
        return;
    }
    const uint64_t hash = fnv1a(words_);
    if (const RecordedPass* kept = cache->find(words_, hash)) {
        context_.submit(kept->commands, dispatches_, false);
        return;
    }
    RecordedPass made = record(false);
    made.hash = hash;
    made.words = std::move(words_);
    context_.submit(cache->keep(std::move(made))->commands, dispatches_, true);
}

RecordedPass Commands::record(bool once) const {
    RecordedPass r;
    r.device = context_.device_;
    const uint32_t n_sets = std::max<uint32_t>(dispatches_, 1);
    const VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n_sets * kMaxBindings};
    auto pool =
        vk_struct<VkDescriptorPoolCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO);
    pool.maxSets = n_sets;
    pool.poolSizeCount = 1;
    pool.pPoolSizes = &size;
    check(vkCreateDescriptorPool(r.device, &pool, nullptr, &r.descriptor_pool),
          "vkCreateDescriptorPool");
    // Its own command pool: recording from a pool must be synchronized, and several backends may
    // record on one device.
    auto command_pool =
        vk_struct<VkCommandPoolCreateInfo>(VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO);
    command_pool.flags = once ? VK_COMMAND_POOL_CREATE_TRANSIENT_BIT : 0;
    command_pool.queueFamilyIndex = context_.queue_family_;
    check(vkCreateCommandPool(r.device, &command_pool, nullptr, &r.command_pool),
          "vkCreateCommandPool");
    auto alloc =
        vk_struct<VkCommandBufferAllocateInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO);
    alloc.commandPool = r.command_pool;
    alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    alloc.commandBufferCount = 1;
    check(vkAllocateCommandBuffers(r.device, &alloc, &r.commands), "vkAllocateCommandBuffers");
    auto begin = vk_struct<VkCommandBufferBeginInfo>(VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO);
    begin.flags = once ? VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT : 0;
    check(vkBeginCommandBuffer(r.commands, &begin), "vkBeginCommandBuffer");
    for (std::size_t i = 0; i < words_.size();)
        i = record_command(i, r.commands, r.descriptor_pool);
    check(vkEndCommandBuffer(r.commands), "vkEndCommandBuffer");
    return r;
}

std::size_t Commands::record_command(std::size_t i, VkCommandBuffer commands,
                                     VkDescriptorPool pool) const {
    const auto next = [&]() { return words_[i++]; };
    switch (next()) {
        case kDispatch: {
            const auto* pipeline = as<const Pipeline*>(next());
            const auto n = static_cast<uint32_t>(next());
            VkDescriptorBufferInfo infos[kMaxBindings];
            for (uint32_t b = 0; b < n; ++b) {
                const auto buffer = as<VkBuffer>(next());
                next();  // its id
                infos[b] = {buffer, next(), VK_WHOLE_SIZE};
            }
            const auto push_bytes = static_cast<uint32_t>(next());
            std::byte push[kMaxPushBytes];
            if (push_bytes > 0) std::memcpy(push, &words_[i], push_bytes);
            i += (push_bytes + 7) / 8;
            const auto x = static_cast<uint32_t>(next());
            const auto y = static_cast<uint32_t>(next());
            const auto z = static_cast<uint32_t>(next());
            auto alloc = vk_struct<VkDescriptorSetAllocateInfo>(
                VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO);
            alloc.descriptorPool = pool;
            alloc.descriptorSetCount = 1;
            alloc.pSetLayouts = &pipeline->set_layout_;
            VkDescriptorSet set = VK_NULL_HANDLE;
            check(vkAllocateDescriptorSets(context_.device_, &alloc, &set),
                  "vkAllocateDescriptorSets");
            VkWriteDescriptorSet writes[kMaxBindings];
            for (uint32_t b = 0; b < n; ++b) {
                writes[b] = vk_struct<VkWriteDescriptorSet>(VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET);
                writes[b].dstSet = set;
                writes[b].dstBinding = b;
                writes[b].descriptorCount = 1;
                writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
                writes[b].pBufferInfo = &infos[b];
            }
            vkUpdateDescriptorSets(context_.device_, n, writes, 0, nullptr);
            vkCmdBindPipeline(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->pipeline_);
            vkCmdBindDescriptorSets(commands, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline->layout_, 0,
                                    1, &set, 0, nullptr);
            if (push_bytes > 0) {
                vkCmdPushConstants(commands, pipeline->layout_, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                                   push_bytes, push);
            }
            vkCmdDispatch(commands, x, y, z);
            return i;
        }
        case kBarrier:
            barrier_between(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            return i;
        case kReset: {
            const auto query_pool = as<VkQueryPool>(next());
            vkCmdResetQueryPool(commands, query_pool, 0, static_cast<uint32_t>(next()));
            return i;
        }
        case kTimestamp: {
            const auto query_pool = as<VkQueryPool>(next());
            vkCmdWriteTimestamp(commands, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool,
                                static_cast<uint32_t>(next()));
            return i;
        }
        case kCopy: {
            const auto from = as<VkBuffer>(next());
            next();  // its id
            const auto to = as<VkBuffer>(next());
            next();  // its id
            VkBufferCopy region{};
            region.srcOffset = next();
            region.dstOffset = next();
            region.size = next();
            barrier_between(commands, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                            VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT,
                            VK_ACCESS_TRANSFER_READ_BIT);
            vkCmdCopyBuffer(commands, from, to, 1, &region);
            barrier_between(
                commands, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_WRITE_BIT,
                VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
            return i;
        }
        default:
            throw UsageError("Vulkan: a malformed command list");
    }
}

}  // namespace minfer::vulkan
