#pragma once
// IEEE half (f16) and bfloat16 conversions, bit-exact with ggml: f32 -> f16 and f32 -> bf16
// round to nearest even; NaN stays NaN (bf16 forces a quiet NaN as ggml does).

#include <bit>
#include <cstdint>

namespace minfer {

inline float f16_to_f32(uint16_t h) {
    // Scale-based conversion (exact for every half, including subnormals).
    const uint32_t w = static_cast<uint32_t>(h) << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    constexpr uint32_t kExpOffset = 0xE0u << 23;
    constexpr float kExpScale = 0x1.0p-112f;
    const float normalized = std::bit_cast<float>((two_w >> 4) + kExpOffset) * kExpScale;
    constexpr uint32_t kMagicMask = 126u << 23;
    constexpr float kMagicBias = 0.5f;
    const float denormalized = std::bit_cast<float>((two_w >> 17) | kMagicMask) - kMagicBias;
    constexpr uint32_t kDenormalCutoff = 1u << 27;
    const uint32_t result = sign | (two_w < kDenormalCutoff ? std::bit_cast<uint32_t>(denormalized)
                                                            : std::bit_cast<uint32_t>(normalized));
    return std::bit_cast<float>(result);
}

inline uint16_t f32_to_f16(float f) {
    constexpr float kScaleToInf = 0x1.0p+112f;
    constexpr float kScaleToZero = 0x1.0p-110f;
    float base = (f < 0 ? -f : f) * kScaleToInf * kScaleToZero;
    const uint32_t w = std::bit_cast<uint32_t>(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
    const uint32_t bits = std::bit_cast<uint32_t>(base);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

inline float bf16_to_f32(uint16_t h) {
    return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_bf16(float f) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64);  // quiet NaN
    return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

}  // namespace minfer
