#pragma once
// A forward pass's commands for one Vulkan device (dispatches, barriers, copies, timestamps),
// submitted once, and the command buffers a backend keeps to submit again.
//
// Commands are first written down as a list of words (which pipeline, which buffers by id, the
// push constants, the sizes), then recorded into a command buffer at submit_and_wait(). The list
// is also the key of a CommandCache: a pass whose commands are those of a pass submitted before
// (a decode step after the last: the same graph shape, buffers and offsets; only the inputs'
// values differ, and they live in buffers) is submitted again as it was recorded, without
// allocating or writing a descriptor set or recording a command.

#include <volk.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/vulkan/vulkan_context.h"

namespace minfer::vulkan {

// A command buffer recorded from a list of commands, with the pools its commands and descriptor
// sets came from (freed with it). Moves, never copies.
struct RecordedPass {
    RecordedPass() = default;
    RecordedPass(RecordedPass&& other) noexcept;
    RecordedPass& operator=(RecordedPass&&) = delete;
    ~RecordedPass();

    std::vector<uint64_t> words;  // the commands it was recorded from
    uint64_t hash = 0;            // of words
    uint64_t last_used = 0;       // CommandCache's clock
    VkDevice device = VK_NULL_HANDLE;
    VkCommandPool command_pool = VK_NULL_HANDLE;
    VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
    VkCommandBuffer commands = VK_NULL_HANDLE;
};

// The passes last submitted by one backend (used by one thread at a time), by their commands;
// the least recently used is dropped beyond `capacity`. A kept pass that names a buffer since
// freed never matches again (buffers are named by their unique ids), so it is never submitted.
class CommandCache {
  public:
    explicit CommandCache(std::size_t capacity = 16) : capacity_(capacity) {}

  private:
    friend class Commands;
    // The pass recorded from `words` before, or null.
    const RecordedPass* find(const std::vector<uint64_t>& words, uint64_t hash);
    // Keeps `pass` (dropping the least recently used beyond capacity); returns it.
    const RecordedPass* keep(RecordedPass pass);

    std::size_t capacity_;
    uint64_t clock_ = 0;
    std::vector<std::unique_ptr<RecordedPass>> kept_;
};

// Dispatches to submit once by submit_and_wait(). Between two dispatches, barrier() makes the
// first one's writes visible to the second.
class Commands {
  public:
    explicit Commands(Context& context) : context_(context) {}
    Commands(const Commands&) = delete;
    Commands& operator=(const Commands&) = delete;

    // groups: workgroups in x, y, z (each at most the device's limit; the caller splits).
    void dispatch(const Pipeline& pipeline, std::span<const Buffer* const> buffers,
                  std::span<const std::byte> push, uint32_t groups_x, uint32_t groups_y = 1,
                  uint32_t groups_z = 1);
    void barrier();
    // Resets the pool's first n slots (before the first timestamp into them), then writes slot
    // i once the commands recorded so far have finished.
    void reset(const TimestampPool& pool, uint32_t n);
    void timestamp(const TimestampPool& pool, uint32_t i);
    // Copies bytes from one buffer to another after the dispatches recorded so far, visible to
    // the dispatches recorded after it, and to the host (a host-visible `to`) once
    // submit_and_wait() returns.
    void copy(const Buffer& from, const Buffer& to, uint64_t bytes, uint64_t from_offset = 0,
              uint64_t to_offset = 0);
    // Records, submits and waits: one submission, one host wait. With a cache, a pass with the
    // same commands as one submitted through it before is submitted again without recording.
    void submit_and_wait(CommandCache* cache = nullptr);

  private:
    // A command buffer recorded from words_ (`once`: to be submitted once).
    RecordedPass record(bool once) const;
    // Records one command of words_ from words_[i] into `commands`; returns the next one's index.
    std::size_t record_command(std::size_t i, VkCommandBuffer commands,
                               VkDescriptorPool pool) const;

    Context& context_;
    std::vector<uint64_t> words_;  // the commands (vulkan_commands.cpp: their encoding)
    uint32_t dispatches_ = 0;
    bool submitted_ = false;
};

}  // namespace minfer::vulkan
