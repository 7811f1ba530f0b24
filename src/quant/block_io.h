#pragma once
// Internal to src/quant: copying blocks in and out of byte buffers that may sit at any address
// (a GGUF file may use an alignment of 1), so no misaligned struct access ever happens.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace minfer::quant_detail {

// Block i of a row of Blocks starting at src.
template <class Block>
inline Block load_block(const void* src, int64_t i) {
    static_assert(std::is_trivially_copyable_v<Block>);
    Block block;
    std::memcpy(&block, static_cast<const std::byte*>(src) + i * sizeof(Block), sizeof(Block));
    return block;
}

template <class Block>
inline void store_block(void* dst, int64_t i, const Block& block) {
    static_assert(std::is_trivially_copyable_v<Block>);
    std::memcpy(static_cast<std::byte*>(dst) + i * sizeof(Block), &block, sizeof(Block));
}

}  // namespace minfer::quant_detail
