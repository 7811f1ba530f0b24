#include "backend/cpu/packed_weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/huge_page_memory.h"
#include "core/log.h"
#include "core/memory_limits.h"
#include "core/thread_pool.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"

namespace minfer {

namespace {

std::size_t round_up(std::size_t n, std::size_t to) {
    return (n + to - 1) / to * to;
}

// Read-only mappings of files in this process (from /proc/self/maps): the only memory whose
// pages may be dropped, since they come back from the file when read again (anonymous memory
// would come back as zeros).
struct FileMappings {
    std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end)

    FileMappings() {
        std::ifstream maps("/proc/self/maps");
        std::string line;
        while (std::getline(maps, line)) {
            // "begin-end perms offset dev inode path"
            std::istringstream in(line);
            std::string range, perms, offset, dev;
            uint64_t inode = 0;
            if (!(in >> range >> perms >> offset >> dev >> inode)) continue;
            const std::size_t dash = range.find('-');
            if (inode == 0 || perms.size() < 2 || perms[1] != '-' || dash == std::string::npos)
                continue;
            ranges.emplace_back(std::stoull(range.substr(0, dash), nullptr, 16),
                                std::stoull(range.substr(dash + 1), nullptr, 16));
        }
    }

    bool contains(uintptr_t begin, uintptr_t end) const {
        return std::any_of(ranges.begin(), ranges.end(),
                           [&](const auto& r) { return r.first <= begin && end <= r.second; });
    }
};

// Drops the pages wholly inside `bytes` from this process's mapping of the file they belong to
// (nothing when they are not in a read-only file mapping).
void drop_file_pages(std::span<const std::byte> bytes, const FileMappings& files) {
    const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t begin = round_up(reinterpret_cast<uintptr_t>(bytes.data()), page);
    const uintptr_t end = (reinterpret_cast<uintptr_t>(bytes.data()) + bytes.size()) / page * page;
    if (end <= begin || !files.contains(begin, end)) return;
    // A hint: if it fails the pages simply stay resident.
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

std::size_t PackedWeights::KeyHash::operator()(const Key& k) const {
    return std::hash<const void*>()(k.data) ^ (k.size * 0x9E3779B97F4A7C15ull);
}

PackedWeights::PackedWeights() = default;
PackedWeights::~PackedWeights() = default;

void PackedWeights::prepare(const std::vector<WeightMatrix>& matrices, ThreadPool& pool) {
    struct Job {
        WeightMatrix w;
        kernels::PackedLayout layout;
        std::size_t offset;
    };
    if (refused_) return;
    std::vector<Job> jobs;
    std::size_t total = 0;
    for (const WeightMatrix& w : matrices) {
        const Key key{w.data.data(), w.data.size()};
        if (copies_.contains(key) || !kernels::has_packed_layout(w.type) ||
            !kernels::packed_kernels_available(w.type)) {
            continue;
        }
        const bool seen = std::any_of(jobs.begin(), jobs.end(), [&](const Job& j) {
            return j.w.data.data() == key.data && j.w.data.size() == key.size;
        });
        if (seen) continue;
        const kernels::PackedLayout layout = kernels::packed_layout(w.type, w.n_cols, w.n_rows);
        jobs.push_back({w, layout, total});
        total += round_up(layout.bytes(), 4096);  // each copy on its own pages
    }
    if (jobs.empty()) return;
    const auto headroom = memory_headroom();
    if (headroom && headroom->bytes < total + total / 8) {
        log_warning(concat("not enough memory for the interleaved copies of the weights (",
                           format_bytes(total), ", ", format_bytes(headroom->bytes),
                           " available): the weights stay in the file's layout (slower)"));
        refused_ = true;
        return;
    }
    const auto start = std::chrono::steady_clock::now();
    std::unique_ptr<HugePageMemory> region;
    try {
        region = std::make_unique<HugePageMemory>(total);
    } catch (const LimitError& e) {
        log_warning(concat(e.what(),
                           " for the interleaved copies of the weights: the weights stay "
                           "in the file's layout (slower)"));
        refused_ = true;
        return;
    }
    std::byte* base = region->data();
    // A slice of a matrix (at most kSliceBytes of copy) after the other, split over the threads
    // (each first-touching its pages), the file pages of its rows dropped as soon as it is
    // packed: resident memory never holds much more than one copy of the weights.
    constexpr std::size_t kSliceBytes = std::size_t{8} << 20;
    const FileMappings files;
    for (const Job& j : jobs) {
        const auto row_bytes = static_cast<int64_t>(row_size(j.w.type, j.w.n_cols));
        const int64_t slice =
            std::max<int64_t>(1, static_cast<int64_t>(kSliceBytes) / j.layout.group_bytes);
        for (int64_t s0 = 0; s0 < j.layout.n_groups; s0 += slice) {
            const int64_t s1 = std::min(j.layout.n_groups, s0 + slice);
            pool.run([&](int i, int n) {
                const int64_t g0 = s0 + (s1 - s0) * i / n, g1 = s0 + (s1 - s0) * (i + 1) / n;
                if (g0 < g1) kernels::repack_groups(j.w, g0, g1, base + j.offset);
            });
            const int64_t r0 = s0 * kernels::kPackedRows;
            const int64_t r1 = std::min(j.w.n_rows, s1 * kernels::kPackedRows);
            drop_file_pages(j.w.data.subspan(static_cast<std::size_t>(r0 * row_bytes),
                                             static_cast<std::size_t>((r1 - r0) * row_bytes)),
                            files);
        }
        copies_.emplace(Key{j.w.data.data(), j.w.data.size()},
                        std::span<const std::byte>(base + j.offset, j.layout.bytes()));
    }
    regions_.push_back(std::move(region));
    bytes_ += total;
    build_ms_ +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

WeightMatrix PackedWeights::attach(WeightMatrix w) const {
    const auto it = copies_.find(Key{w.data.data(), w.data.size()});
    if (it != copies_.end()) w.packed = it->second;
    return w;
}

}  // namespace minfer
