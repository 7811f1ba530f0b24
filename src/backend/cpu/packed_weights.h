#pragma once
// The CPU backend's interleaved copies of the matmul weights (kernels/packed_layout.h), built
// once, the first time a graph multiplies a matrix (the engine shows the backend a one-token
// graph at start, so that is at load). Only the CPU backend sees them: the graph and every other
// backend read the file's layout.
//
// A copy is made where it pays: for the types whose interleaved kernels the CPU runs (AVX-512 or
// AVX2: Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K, IQ4_XS, F32, F16, BF16).
// Copies live in anonymous memory asked for in transparent huge pages (one TLB entry per 2 MiB of
// the stream decoding reads); where the originals lie in a read-only file mapping (a model's
// weights do), their pages are then dropped from this process's mapping (MADV_DONTNEED: they stay
// in the page cache, and come back on a read, e.g. of a tied embedding's rows), so resident memory
// grows by little more than the copies' padding. Unlike the mapped file, the copies are not shared
// between processes: every replica of a server holds its own.
//
// Copies are keyed by a matrix's bytes in the file. A 3-D tensor (experts) is packed one 2-D
// matrix at a time: hand prepare() each expert's WeightMatrix (Weight::matrix(e)), and attach()
// finds the copy of whichever expert a product reads.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/huge_page_memory.h"
#include "kernels/matmul.h"

namespace minfer {

class ThreadPool;

class PackedWeights {
  public:
    PackedWeights();
    ~PackedWeights();
    PackedWeights(const PackedWeights&) = delete;
    PackedWeights& operator=(const PackedWeights&) = delete;

    // Packs every matrix given that has no copy yet and whose type has interleaved kernels on
    // this CPU, on the pool's threads (not from inside a pool.run). Skips them, with a warning,
    // when the memory for the copies is not available, and from then on packs nothing (the
    // backend calls this before every graph: one warning, not one per step).
    void prepare(const std::vector<WeightMatrix>& matrices, ThreadPool& pool);

    // w with its interleaved copy attached, if it has one.
    WeightMatrix attach(WeightMatrix w) const;

    std::size_t bytes() const { return bytes_; }  // of all copies
    std::size_t matrices() const { return copies_.size(); }
    double build_ms() const { return build_ms_; }  // spent packing, in all

  private:
    struct Key {
        const std::byte* data;
        std::size_t size;
        bool operator==(const Key&) const = default;
    };
    struct KeyHash {
        std::size_t operator()(const Key& k) const;
    };

    std::vector<std::unique_ptr<HugePageMemory>> regions_;  // the copies of each prepare()
    std::unordered_map<Key, std::span<const std::byte>, KeyHash> copies_;
    std::size_t bytes_ = 0;
    double build_ms_ = 0;
    bool refused_ = false;  // the memory for copies was refused once: no more tries
};

}  // namespace minfer
