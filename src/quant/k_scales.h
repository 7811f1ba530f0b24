#pragma once
// The packed sub-block scales of the K-quants, as ggml lays them out, with the inverse packing
// used by the quantizers. Shared by dequantization, quantization and the kernels.

#include <array>
#include <cstdint>

#include "quant/block_types.h"

namespace minfer {

// ---- Q4_K and Q5_K: 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min in 12 bytes.
// Sub-blocks 0-3 keep their scale in the low 6 bits of bytes 0-3 and their min in bytes 4-7;
// sub-blocks 4-7 keep their low 4 bits in the nibbles of bytes 8-11 and their top 2 bits in the
// top bits of bytes 0-3 (scale) and 4-7 (min).

struct ScaleMin {
    uint8_t scale;  // 0..63
    uint8_t min;    // 0..63
};

inline ScaleMin unpack_scale_min_k4(int j, const uint8_t* packed) {
    if (j < 4) {
        return {static_cast<uint8_t>(packed[j] & 63), static_cast<uint8_t>(packed[j + 4] & 63)};
    }
    return {static_cast<uint8_t>((packed[j + 4] & 0xF) | ((packed[j - 4] >> 6) << 4)),
            static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4))};
}

// scales and mins hold 6-bit values (0..63).
inline std::array<uint8_t, K_SCALE_SIZE> pack_scale_min_k4(const uint8_t (&scales)[8],
                                                           const uint8_t (&mins)[8]) {
    std::array<uint8_t, K_SCALE_SIZE> packed{};
    for (int j = 0; j < 4; ++j) {
        packed[j] = static_cast<uint8_t>(scales[j] | ((scales[j + 4] >> 4) << 6));
        packed[j + 4] = static_cast<uint8_t>(mins[j] | ((mins[j + 4] >> 4) << 6));
        packed[j + 8] = static_cast<uint8_t>((scales[j + 4] & 0xF) | ((mins[j + 4] & 0xF) << 4));
    }
    return packed;
}

// ---- Q3_K: 16 sub-blocks of 16, each with a signed 6-bit scale stored as scale + 32.
// The low 4 bits of sub-block j are a nibble of byte j % 8 (low nibble for j < 8); the top 2
// bits are bits 2 * (j / 4) of byte 8 + j % 4.

// Returns the 16 signed scales (-32..31).
inline std::array<int8_t, 16> unpack_q3_k_scales(const uint8_t* packed) {
    std::array<int8_t, 16> scales{};
    for (int j = 0; j < 16; ++j) {
        const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
        const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
        scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
    }
    return scales;
}

// biased holds scale + 32 (0..63) for each sub-block.
inline std::array<uint8_t, 12> pack_q3_k_scales(const uint8_t (&biased)[16]) {
    std::array<uint8_t, 12> packed{};
    for (int j = 0; j < 16; ++j) {
        const uint8_t low = biased[j] & 0xF;
        const uint8_t high = static_cast<uint8_t>(biased[j] >> 4);
        if (j < 8) {
            packed[j] = low;
        } else {
            packed[j - 8] = static_cast<uint8_t>(packed[j - 8] | (low << 4));
        }
        packed[8 + j % 4] = static_cast<uint8_t>(packed[8 + j % 4] | (high << (2 * (j / 4))));
    }
    return packed;
}

// ---- IQ4_XS: 8 sub-blocks of 32, each with a signed 6-bit scale stored as scale + 32: low 4 bits
// in a nibble of scales_l[j / 2], top 2 bits at bits 2 * j of scales_h.
inline int unpack_iq4_xs_scale(int j, const block_iq4_xs& block) {
    const int low = (block.scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    const int high = (block.scales_h >> (2 * j)) & 3;
    return (low | (high << 4)) - 32;
}

}  // namespace minfer
