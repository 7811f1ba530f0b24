// Building blocks of the x86 GEMV kernels: horizontal sums, u8 x s8 dot products (vpdpbusd with
// VNNI, vpmaddubsw + vpmaddwd without), 16-bit scale broadcasts.
// Per-target code: included by gemv_simd.cpp once per Highway target (AVX2 and AVX-512 only).

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GEMV_X86_COMMON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GEMV_X86_COMMON_INL_H_
#undef MINFER_KERNELS_GEMV_X86_COMMON_INL_H_
#else
#define MINFER_KERNELS_GEMV_X86_COMMON_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/kernel_path.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

// Sum of the 8 lanes.
inline float HorizontalSum(__m256 v) {
    const __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pairs = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

inline float HalfToFloat(uint16_t h) {
    return _cvtsh_ss(h);
}

// acc + sums of 4 products u8 x s8 per 32-bit lane; u must be <= 127 without VNNI (the 16-bit
// pair sums of vpmaddubsw saturate above that).
template <bool kVnni>
inline __m256i DotU8S8(__m256i acc, __m256i u, __m256i s) {
#if HWY_TARGET == HWY_AVX3
    if constexpr (kVnni) {
        asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
        return acc;
    }
#endif
    const __m256i pairs = _mm256_maddubs_epi16(u, s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

// Signed x signed through |w| and sign(a, w): |w| <= 128, so no saturation.
template <bool kVnni>
inline __m256i DotS8S8(__m256i acc, __m256i w, __m256i a) {
    return DotU8S8<kVnni>(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
}

// How far ahead of the kernel the weight stream is prefetched (rows are contiguous, so this
// reaches into the next rows). The 4-bit kernels spend more instructions per byte than the
// out-of-order window can cover while a line arrives from DRAM; measured on Zen 4, one core,
// Q4_0: 256 bytes 15.3 GB/s, 4 KiB 18.3, 8 KiB 18.9, 16 KiB 17.1. (The K-quant kernels do
// better without: Q4_K and Q6_K lost 5-10 %.)
constexpr int kFarPrefetchBytes = 8192;

inline __m256i Load256(const void* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

struct alignas(32) Int32x8 {
    int32_t lanes[8];
};
struct alignas(32) Int8x32 {
    int8_t bytes[32];
};

// Byte shuffles that broadcast 16-bit lane j of a 128-bit half to the whole half (scale j).
struct alignas(32) ShuffleMasks {
    uint8_t bytes[8][32];
    constexpr ShuffleMasks() : bytes{} {
        for (int j = 0; j < 8; ++j) {
            for (int i = 0; i < 32; ++i) bytes[j][i] = static_cast<uint8_t>(2 * j + (i & 1));
        }
    }
};
inline constexpr ShuffleMasks kBroadcastI16{};

inline __m256i BroadcastI16(__m256i eight_in_each_half, int j) {
    return _mm256_shuffle_epi8(
        eight_in_each_half,
        _mm256_load_si256(reinterpret_cast<const __m256i*>(kBroadcastI16.bytes[j])));
}

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
