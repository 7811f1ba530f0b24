#include "core/huge_page_memory.h"

#include <sys/mman.h>

#include <cstdint>

#include "core/error.h"
#include "core/memory_limits.h"

namespace minfer {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

}  // namespace

HugePageMemory::HugePageMemory(std::size_t bytes) : size_(round_up(bytes, kHugePage)) {
    // One huge page more, to align the start.
    void* p = ::mmap(nullptr, size_ + kHugePage, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw LimitError(concat("cannot map ", format_bytes(size_)));
    mapping_ = p;
    base_ = reinterpret_cast<std::byte*>(round_up(reinterpret_cast<uintptr_t>(p), kHugePage));
    ::madvise(base_, size_, MADV_HUGEPAGE);  // a hint, like the others
}

HugePageMemory::~HugePageMemory() {
    ::munmap(mapping_, size_ + kHugePage);
}

}  // namespace minfer
