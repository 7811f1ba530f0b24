#pragma once
// Internal to src/quant: the float-to-integer conversions of ggml's quantizers, made total. ggml
// converts with C casts that are undefined for NaN, infinities and huge values; these helpers give
// every input a defined result that equals what ggml computes on x86 for every finite, in-range
// input (and for the rest, what x86's conversion instruction returns: INT32_MIN).

#include <bit>
#include <cstdint>

namespace minfer::quant_detail {

// C's (int)v: truncation toward zero; INT32_MIN when v is NaN or outside the int range.
inline int32_t truncate_to_int(float v) {
    if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
    return static_cast<int32_t>(v);
}

// ggml's nearest_int: round half to even by adding 1.5 * 2^23 and reading the mantissa. Exact
// for |v| <= 2^22 - 1; for larger or non-finite values the result is garbage, but defined.
inline int nearest_int(float v) {
    const float shifted = v + 12582912.0f;
    const auto bits = std::bit_cast<int32_t>(shifted);
    return (bits & 0x007fffff) - 0x00400000;
}

// C's roundf (half away from zero) followed by a conversion to int, without a libm call: the
// fraction v - trunc(v) is exact for every float, so comparing it with +-0.5 rounds exactly.
inline int32_t round_to_int(float v) {
    if (!(v > -2147483904.0f && v < 2147483648.0f)) return INT32_MIN;
    const auto r = static_cast<int32_t>(v);
    const float fraction = v - static_cast<float>(r);
    // Branch-free: the comparisons are unpredictable on real data.
    return r + static_cast<int32_t>(fraction >= 0.5f) - static_cast<int32_t>(fraction <= -0.5f);
}

// The low byte of an int, as C's conversion to int8_t keeps it.
inline int8_t low_byte(int32_t v) {
    return static_cast<int8_t>(v);
}

}  // namespace minfer::quant_detail
