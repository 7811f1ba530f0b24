// Activation tiles of the integer GEMM (see matmul_internal.h): each token's Q8_0 / Q8_1 / Q8_K
// row is regrouped so that a kernel finds a tile's tokens' 4-value groups side by side, with
// the per-sub-block corrections and the per-block scales next to them.

#include <cstring>

#include "core/half.h"
#include "kernels/block_unpack.h"
#include "kernels/matmul_internal.h"
#include "quant/block_types.h"

namespace minfer::kernels {
namespace {

struct ActivationSizes {
    std::size_t q, per_sub, per_block, per_pair;
};

int tile_width(int64_t n_tokens) {
    return n_tokens == 1 ? 1 : kTokenTile;
}

int64_t padded_tokens(int64_t n_tokens) {
    const int width = tile_width(n_tokens);
    return (n_tokens + width - 1) / width * width;
}

ActivationSizes activation_sizes(const UnpackLayout& layout, int64_t n_cols, int64_t n_tokens) {
    const auto padded = static_cast<std::size_t>(padded_tokens(n_tokens));
    const auto n_sub = static_cast<std::size_t>(n_cols / layout.sub_size);
    const auto n_blocks = static_cast<std::size_t>(n_cols / layout.block_values);
    return {align64(padded * static_cast<std::size_t>(n_cols)), align64(padded * n_sub * 4),
            align64(padded * n_blocks * 4), align64(padded * (n_sub / 2) * 4)};
}

}  // namespace

std::size_t int_activations_bytes(GgmlType weight_type, int64_t n_cols, int64_t n_tokens) {
    const ActivationSizes s = activation_sizes(unpack_layout(weight_type), n_cols, n_tokens);
    return s.q + s.per_sub + 2 * s.per_block + s.per_pair;
}

IntActivations int_activations_at(std::byte* memory, GgmlType weight_type, int64_t n_cols,
                                  int64_t n_tokens) {
    const UnpackLayout layout = unpack_layout(weight_type);
    const ActivationSizes s = activation_sizes(layout, n_cols, n_tokens);
    const bool block32 = layout.block_values == 32;
    IntActivations a{};
    std::byte* p = memory;
    a.q = reinterpret_cast<const int8_t*>(p);
    p += s.q;
    a.corr = reinterpret_cast<const int32_t*>(p);
    p += s.per_sub;
    a.d = reinterpret_cast<const float*>(p);
    p += s.per_block;
    a.sum = layout.has_min && block32 ? reinterpret_cast<const float*>(p) : nullptr;
    p += s.per_block;
    a.bsum = layout.has_min && !block32 ? reinterpret_cast<const int32_t*>(p) : nullptr;
    a.n_cols = n_cols;
    a.n_sub = n_cols / layout.sub_size;
    a.n_blocks = n_cols / layout.block_values;
    a.width = tile_width(n_tokens);
    return a;
}

namespace {

// One token's row of Q8_0 / Q8_1 activations (blocks of 32, one sub-block each).
void fill_token_block32(GgmlType act_type, const std::byte* row, const IntActivations& a,
                        int64_t tile, int slot) {
    auto* q_tile = const_cast<int8_t*>(a.q_tile(tile));
    for (int64_t b = 0; b < a.n_blocks; ++b) {
        const int8_t* qs = nullptr;
        float d = 0.0f, s = 0.0f;
        if (act_type == GgmlType::Q8_1) {
            const auto& block = reinterpret_cast<const block_q8_1*>(row)[b];
            qs = block.qs;
            d = f16_to_f32(block.d);
            s = f16_to_f32(block.s);
        } else {
            const auto& block = reinterpret_cast<const block_q8_0*>(row)[b];
            qs = block.qs;
            d = f16_to_f32(block.d);
        }
        int32_t qsum = 0;
        for (int i = 0; i < 32; ++i) qsum += qs[i];
        if (a.width == 1) {  // dense: the block's values as they are
            std::memcpy(q_tile + b * 32, qs, 32);
        } else {
            for (int g = 0; g < 8; ++g) {
                std::memcpy(q_tile + ((b * 8 + g) * a.width + slot) * 4, qs + g * 4, 4);
            }
        }
        const int64_t at = a.block_tile(tile) + b * a.width + slot;
        const_cast<int32_t*>(a.corr)[at] = -128 * qsum;  // one sub-block per block
        const_cast<float*>(a.d)[at] = d;
        if (a.sum != nullptr) const_cast<float*>(a.sum)[at] = s;
    }
}

// One token's row of Q8_K activations (blocks of 256; sub-blocks of 16 or 32 values, whose sums
// the block's bsums already hold per 16 values).
void fill_token_q8_k(const std::byte* row, int sub_size, const IntActivations& a, int64_t tile,
                     int slot) {
    auto* q_tile = const_cast<int8_t*>(a.q_tile(tile));
    const int subs_per_block = QK_K / sub_size;
    const int per16 = sub_size / 16;
    for (int64_t b = 0; b < a.n_blocks; ++b) {
        const auto& block = reinterpret_cast<const block_q8_K*>(row)[b];
        if (a.width == 1) {  // dense: the block's values as they are
            std::memcpy(q_tile + b * QK_K, block.qs, QK_K);
        } else {
            for (int g = 0; g < QK_K / 4; ++g) {
                std::memcpy(q_tile + ((b * QK_K / 4 + g) * a.width + slot) * 4, block.qs + g * 4,
                            4);
            }
        }
        int32_t sums[16];
        for (int j = 0; j < subs_per_block; ++j) {
            sums[j] = block.bsums[j * per16] + (per16 == 2 ? block.bsums[j * per16 + 1] : 0);
            const int64_t s = b * subs_per_block + j;
            const_cast<int32_t*>(a.corr)[a.sub_tile(tile) + s * a.width + slot] = -128 * sums[j];
        }
        const_cast<float*>(a.d)[a.block_tile(tile) + b * a.width + slot] = block.d;
        if (a.bsum == nullptr) continue;
        for (int j = 0; j < subs_per_block / 2; ++j) {
            const int64_t pair = b * subs_per_block / 2 + j;
            const_cast<int32_t*>(a.bsum)[a.pair_tile(tile) + pair * a.width + slot] =
                (sums[2 * j] & 0xFFFF) | (sums[2 * j + 1] << 16);
        }
    }
}

}  // namespace

void fill_int_activations(GgmlType weight_type, const Activations& act, int64_t n_cols,
                          int64_t t_begin, int64_t t_end, std::byte* memory) {
    const IntActivations a = int_activations_at(memory, weight_type, n_cols, act.n_tokens);
    const int sub_size = unpack_layout(weight_type).sub_size;
    // The unused slots of the last tile stay as they are: the kernels multiply only real tokens.
    for (int64_t t = t_begin; t < t_end; ++t) {
        const int64_t tile = t / a.width;
        const int slot = static_cast<int>(t % a.width);
        const std::byte* row = act.data + static_cast<std::size_t>(t) * act.row_bytes;
        if (act.type == GgmlType::Q8_K) {
            fill_token_q8_k(row, sub_size, a, tile, slot);
        } else {
            fill_token_block32(act.type, row, a, tile, slot);
        }
    }
}

}  // namespace minfer::kernels
