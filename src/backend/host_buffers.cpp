#include "backend/host_buffers.h"

#include <algorithm>

#include "core/error.h"

namespace minfer {
namespace {

std::size_t values(const BufferDecl& b) {
    return static_cast<std::size_t>(b.rows * b.width);
}

}  // namespace

uint64_t HostBuffers::growth(const Graph& g) const {
    uint64_t n = 0;
    for (std::size_t b = 0; b < g.buffers.size(); ++b) {
        const std::size_t have = b >= f32_.size()                   ? 0
                                 : g.buffers[b].type == DType::kF32 ? f32_[b].size()
                                                                    : i32_[b].size();
        if (have < values(g.buffers[b])) n += (values(g.buffers[b]) - have) * sizeof(float);
    }
    return n;
}

void HostBuffers::grow(const Graph& g) {
    if (f32_.size() < g.buffers.size()) {
        f32_.resize(g.buffers.size());
        i32_.resize(g.buffers.size());
    }
    for (std::size_t b = 0; b < g.buffers.size(); ++b) {
        auto grow_to = [n = values(g.buffers[b])](auto& v) {
            if (v.size() < n) v.resize(n);
        };
        if (g.buffers[b].type == DType::kF32) {
            grow_to(f32_[b]);
        } else {
            grow_to(i32_[b]);
        }
    }
}

void HostBuffers::clear() {
    for (auto& v : f32_) std::fill(v.begin(), v.end(), 0.0f);
    for (auto& v : i32_) std::fill(v.begin(), v.end(), 0);
}

void HostBuffers::write_carried(const Graph& g) {
    for (const CarriedRows& c : g.carried_in)
        std::copy(c.values.begin(), c.values.end(), f32(c.buffer));
}

std::span<const float> HostBuffers::f32_values(BufferId b, std::size_t count) const {
    if (b < 0 || static_cast<std::size_t>(b) >= f32_.size() ||
        f32_[static_cast<std::size_t>(b)].size() < count)
        throw UsageError(concat("activation buffer ", b, " holds fewer than ", count, " values"));
    return {f32_[static_cast<std::size_t>(b)].data(), count};
}

std::size_t HostBuffers::bytes() const {
    std::size_t n = 0;
    for (const auto& v : f32_) n += v.capacity() * sizeof(float);
    for (const auto& v : i32_) n += v.capacity() * sizeof(int32_t);
    return n;
}

}  // namespace minfer
