#pragma once
// How much more memory this process may allocate, from every limit that can stop it: the
// kernel's MemAvailable, the cgroup's memory limit (v2 memory.max, v1 memory.limit_in_bytes)
// less what the cgroup already uses, and RLIMIT_AS less the address space already mapped.
// Large allocations asked for by a user (a KV cache for --ctx 16777216) are checked against it
// first, so that they end in a one-line error with the sizes instead of std::bad_alloc or the
// OOM killer.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace minfer {

struct MemoryHeadroom {
    uint64_t bytes = 0;
    std::string limited_by;  // "MemAvailable", "the cgroup's memory limit", "RLIMIT_AS (ulimit -v)"
};

// The smallest headroom among the limits that could be read; nullopt when none could.
std::optional<MemoryHeadroom> memory_headroom();

// Throws LimitError "<what> needs X GiB, but only Y GiB are available (limited by ...)<advice>"
// when `bytes` exceed the headroom.
void require_memory(uint64_t bytes, std::string_view what, std::string_view advice);

// The most memory this process has held resident so far (VmHWM: anonymous and mapped file pages
// alike); nullopt where /proc cannot be read. What a model's weights cost in RAM, with or
// without copies of them.
std::optional<uint64_t> peak_resident_bytes();

// Starts peak_resident_bytes() again from the memory resident now (after memory that should not
// count was released); false where the kernel refuses (the peak then stays as it was).
bool reset_peak_resident();

// "1.5 GiB", "300.0 MiB", "12.0 KiB": sizes in messages.
std::string format_bytes(uint64_t bytes);

}  // namespace minfer
