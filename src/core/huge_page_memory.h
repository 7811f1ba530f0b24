#pragma once
// Anonymous memory, 2 MiB aligned and asked for in transparent huge pages (a hint: where the
// kernel gives none it is ordinary pages). For the large blocks that are streamed through again
// and again, where 4 KiB pages cost TLB misses: the CPU backend's copies of the weights, and the
// read buffer the bandwidth measurement compares them with.

#include <cstddef>

namespace minfer {

class HugePageMemory {
  public:
    // Maps `bytes` rounded up to 2 MiB (untouched: pages appear on first write). LimitError when
    // the mapping is refused.
    explicit HugePageMemory(std::size_t bytes);
    ~HugePageMemory();
    HugePageMemory(const HugePageMemory&) = delete;
    HugePageMemory& operator=(const HugePageMemory&) = delete;

    std::byte* data() const { return base_; }
    std::size_t size() const { return size_; }

  private:
    std::size_t size_;
    void* mapping_ = nullptr;
    std::byte* base_ = nullptr;
};

}  // namespace minfer
