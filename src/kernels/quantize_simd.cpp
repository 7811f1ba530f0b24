// Activation quantization (Q8_0 / Q8_1 / Q8_K) with SIMD, bit-identical with the scalar
// versions in activation_quant.cpp (same operations in the same order: max of |x|, one multiply,
// round half to even). Compiled once per Highway target; targets without AVX2 use the scalar code.

#include <cmath>
#include <cstring>

#include "core/half.h"
#include "kernels/activation_quant.h"
#include "kernels/matmul_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quantize_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

inline __m256 AbsPs(__m256 v) {
    return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v);
}

inline float MaxLanes(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

// Rounds 32 floats * mul to nearest even and stores them as int8; returns their sum.
inline int RoundStore32(const float* x, __m256 mul, int8_t* q) {
    __m256i i[4];
    for (int k = 0; k < 4; ++k) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), mul);
        i[k] =
            _mm256_cvtps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    const __m256i sum =
        _mm256_add_epi32(_mm256_add_epi32(i[0], i[1]), _mm256_add_epi32(i[2], i[3]));
    // Packing interleaves 128-bit lanes; the permute restores element order.
    const __m256i w01 = _mm256_packs_epi32(i[0], i[1]);
    const __m256i w23 = _mm256_packs_epi32(i[2], i[3]);
    const __m256i b = _mm256_packs_epi16(w01, w23);
    const __m256i ordered =
        _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), ordered);
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

inline float BlockAmax(const float* x, int n) {
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < n; k += 8) m = _mm256_max_ps(m, AbsPs(_mm256_loadu_ps(x + k)));
    return MaxLanes(m);
}

template <bool kWithSum, class Block>
void QuantizeQ8_32(const float* x, Block* y, int64_t n) {
    for (int64_t b = 0; b < n / 32; ++b, x += 32) {
        const float amax = BlockAmax(x, 32);
        const float d = amax / 127.f;
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        const int sum = RoundStore32(x, _mm256_set1_ps(id), y[b].qs);
        y[b].d = f32_to_f16(d);
        if constexpr (kWithSum) y[b].s = f32_to_f16(d * static_cast<float>(sum));
    }
}

void QuantizeQ8_K(const float* x, block_q8_K* y, int64_t n) {
    for (int64_t b = 0; b < n / QK_K; ++b, x += QK_K) {
        block_q8_K& out = y[b];
        const float amax = BlockAmax(x, QK_K);
        if (amax == 0.0f) {
            std::memset(&out, 0, sizeof(out));
            continue;
        }
        // ggml keeps the sign of the first value of largest magnitude.
        float max = amax;
        for (int j = 0; j < QK_K; ++j) {
            if (std::fabs(x[j]) == amax) {
                max = x[j];
                break;
            }
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j += 32) {
            RoundStore32(x + j, _mm256_set1_ps(iscale), out.qs + j);
        }
        // |iscale * x| <= 127 up to rounding, so ggml's clamp to 127 and the saturating packs
        // above agree.
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int i = 0; i < 16; ++i) sum += out.qs[j * 16 + i];
            out.bsums[j] = static_cast<int16_t>(sum);
        }
        out.d = 1 / iscale;
    }
}

void QuantizeActivations(GgmlType activation_type, const float* x, std::byte* out, int64_t n) {
    if (activation_type == GgmlType::Q8_0) {
        QuantizeQ8_32<false>(x, reinterpret_cast<block_q8_0*>(out), n);
    } else if (activation_type == GgmlType::Q8_1) {
        QuantizeQ8_32<true>(x, reinterpret_cast<block_q8_1*>(out), n);
    } else {
        QuantizeQ8_K(x, reinterpret_cast<block_q8_K*>(out), n);
    }
}

#else

void QuantizeActivations(GgmlType activation_type, const float* x, std::byte* out, int64_t n) {
    if (activation_type == GgmlType::Q8_0) {
        quantize_activations_q8_0(x, reinterpret_cast<block_q8_0*>(out), n);
    } else if (activation_type == GgmlType::Q8_1) {
        quantize_activations_q8_1(x, reinterpret_cast<block_q8_1*>(out), n);
    } else {
        quantize_activations_q8_K(x, reinterpret_cast<block_q8_K*>(out), n);
    }
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(QuantizeActivations);

void quantize_activations_simd(GgmlType activation_type, const float* x, std::byte* out,
                               int64_t n) {
    HWY_DYNAMIC_DISPATCH(QuantizeActivations)(activation_type, x, out, n);
}

}  // namespace minfer::kernels
#endif
