#pragma once
// The activation buffers of a backend that computes in host memory (cpu/, reference/): one array
// per BufferId of the graphs it executes, of the type the graph declares (f32 or i32), sized
// [rows][width] and kept (grown, never shrunk) from graph to graph.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "model/graph.h"

namespace minfer {

class HostBuffers {
  public:
    // Bytes the buffers of `g` need beyond what is allocated (0: grow() moves nothing).
    uint64_t growth(const Graph& g) const;
    // Grows every buffer g declares to its size (new values zero).
    void grow(const Graph& g);
    // Sets every value of g's buffers to zero (the reference backend starts each graph so).
    void clear();
    // Writes g's carried rows (Graph::carried_in) into their buffers, grown before.
    void write_carried(const Graph& g);
    // The first `count` values of f32 buffer b; throws UsageError beyond what it holds.
    std::span<const float> f32_values(BufferId b, std::size_t count) const;

    float* f32(BufferId b) { return f32_[static_cast<std::size_t>(b)].data(); }
    int32_t* i32(BufferId b) { return i32_[static_cast<std::size_t>(b)].data(); }
    const float* f32(BufferId b) const { return f32_[static_cast<std::size_t>(b)].data(); }
    std::size_t bytes() const;

  private:
    // By BufferId: an f32 buffer uses f32_ and an i32 one i32_ (the other stays empty). A
    // BufferId may change type from one graph to the next: the unused array is then kept.
    std::vector<std::vector<float>> f32_;
    std::vector<std::vector<int32_t>> i32_;
};

}  // namespace minfer
