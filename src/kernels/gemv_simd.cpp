// GEMV (one token at a time), compiled once per Highway target. Memory-bound: each weight byte is
// read once per token while the activation row stays in L1. On AVX2 and AVX-512 every type but
// the ternary ones has a kernel on 256-bit vectors (on Zen 4 a 512-bit operation costs two
// 256-bit ones, and 256 bits match the 32-value blocks); AVX-512 adds vpdpbusd (VNNI) through
// inline assembly. The kernels live in gemv_x86_*-inl.h; this file holds the float kernels and
// the dispatch. Other types report "not handled" and the caller runs the scalar reference; on
// other targets (aarch64) one token takes the panel kernels instead (matmul.cpp).

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "kernels/block_unpack.h"
#include "kernels/kernel_path.h"
#include "kernels/matmul_simd.h"
#include "quant/block_types.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemv_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format off: the per-target headers must follow highway.h
#include "kernels/gemv_x86_common-inl.h"
#include "kernels/gemv_x86_kquants-inl.h"
#include "kernels/gemv_x86_legacy-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

// Float weights against f32 activations (already rounded to f16/bf16 where ggml does that).
template <GgmlType kType>
float DotFloat(const std::byte* w_row, const float* x, int64_t n) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    auto load = [&](int64_t i) {
        if constexpr (kType == GgmlType::F32) {
            return _mm256_loadu_ps(reinterpret_cast<const float*>(w_row) + i);
        } else {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w_row) + i / 8);
            if constexpr (kType == GgmlType::F16) {
                return _mm256_cvtph_ps(h);
            } else {
                return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
            }
        }
    };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm_prefetch(
            reinterpret_cast<const char*>(w_row) + (i + 256) * (kType == GgmlType::F32 ? 4 : 2),
            _MM_HINT_T0);
        for (int k = 0; k < 4; ++k) {
            acc[k] = _mm256_fmadd_ps(load(i + 8 * k), _mm256_loadu_ps(x + i + 8 * k), acc[k]);
        }
    }
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load(i), _mm256_loadu_ps(x + i), acc[0]);
    float sum =
        HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; ++i) {
        const auto* bytes = w_row;
        float wi;
        if constexpr (kType == GgmlType::F32) {
            std::memcpy(&wi, bytes + i * 4, 4);
        } else {
            uint16_t h;
            std::memcpy(&h, bytes + i * 2, 2);
            wi = kType == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        sum += wi * x[i];
    }
    return sum;
}

template <bool kVnni>
bool GemvRowsImpl(const WeightMatrix& w, const Activations& act, int64_t r0, int64_t r1, float* y) {
    const std::size_t row_bytes = row_size(w.type, w.n_cols);
    const std::byte* base = w.data.data();
    const int64_t n_blocks32 = w.n_cols / 32;
    const int64_t n_blocks256 = w.n_cols / QK_K;
    thread_local Q8View q8;
    thread_local std::vector<float> scales;
    thread_local std::vector<Int32x8> bsum_pairs;
    scales.resize(static_cast<std::size_t>(n_blocks32) + 8);
    for (int64_t t = 0; t < act.n_tokens; ++t) {
        const std::byte* a_row = act.data + static_cast<std::size_t>(t) * act.row_bytes;
        float* yt = y + t * w.n_rows;
        const auto* a_k = reinterpret_cast<const block_q8_K*>(a_row);
        const auto* a_f = reinterpret_cast<const float*>(a_row);
        switch (w.type) {
            case GgmlType::Q4_0:
            case GgmlType::Q5_0:
            case GgmlType::Q8_0:
            case GgmlType::IQ4_NL:
                PrepareQ8<block_q8_0>(a_row, n_blocks32, w.type != GgmlType::Q8_0, q8);
                break;
            case GgmlType::Q4_1:
            case GgmlType::Q5_1:
                PrepareQ8<block_q8_1>(a_row, n_blocks32, true, q8);
                break;
            case GgmlType::Q4_K:
            case GgmlType::Q5_K:
                PrepareBsumPairs(a_k, n_blocks256, bsum_pairs);
                break;
            default:
                break;
        }
        auto nibble_rows = [&](auto kind, auto block) {
            using Block = std::remove_const_t<std::remove_pointer_t<decltype(block)>>;
            NibbleRows<kVnni, decltype(kind)::value, Block>(base, row_bytes, r0, r1, q8, n_blocks32,
                                                            scales.data(), yt);
        };
        switch (w.type) {
            case GgmlType::Q4_0:
                nibble_rows(std::integral_constant<Nibbles, Nibbles::kQ4_0>{},
                            static_cast<const block_q4_0*>(nullptr));
                continue;
            case GgmlType::Q4_1:
                nibble_rows(std::integral_constant<Nibbles, Nibbles::kQ4_1>{},
                            static_cast<const block_q4_1*>(nullptr));
                continue;
            case GgmlType::Q5_0:
                nibble_rows(std::integral_constant<Nibbles, Nibbles::kQ5_0>{},
                            static_cast<const block_q5_0*>(nullptr));
                continue;
            case GgmlType::Q5_1:
                nibble_rows(std::integral_constant<Nibbles, Nibbles::kQ5_1>{},
                            static_cast<const block_q5_1*>(nullptr));
                continue;
            case GgmlType::IQ4_NL:
                nibble_rows(std::integral_constant<Nibbles, Nibbles::kIq4Nl>{},
                            static_cast<const block_iq4_nl*>(nullptr));
                continue;
            default:
                break;
        }
        for (int64_t r = r0; r < r1; ++r) {
            const std::byte* row = base + static_cast<std::size_t>(r) * row_bytes;
            switch (w.type) {
                case GgmlType::Q8_0:
                    yt[r] = DotQ8_0<kVnni>(reinterpret_cast<const block_q8_0*>(row), q8, n_blocks32,
                                           scales.data());
                    break;
                case GgmlType::Q4_K:
                    yt[r] = DotQ45_K(reinterpret_cast<const block_q4_K*>(row), a_k,
                                     bsum_pairs.data(), n_blocks256);
                    break;
                case GgmlType::Q5_K:
                    yt[r] = DotQ45_K(reinterpret_cast<const block_q5_K*>(row), a_k,
                                     bsum_pairs.data(), n_blocks256);
                    break;
                case GgmlType::Q2_K:
                    yt[r] = DotQ23_K(reinterpret_cast<const block_q2_K*>(row), a_k, n_blocks256);
                    break;
                case GgmlType::Q3_K:
                    yt[r] = DotQ23_K(reinterpret_cast<const block_q3_K*>(row), a_k, n_blocks256);
                    break;
                case GgmlType::IQ4_XS:
                    yt[r] = DotIq4Xs(reinterpret_cast<const block_iq4_xs*>(row), a_k, n_blocks256);
                    break;
                case GgmlType::Q6_K:
                    yt[r] = DotQ6_K(reinterpret_cast<const block_q6_K*>(row), a_k, n_blocks256);
                    break;
                case GgmlType::F16:
                    yt[r] = DotFloat<GgmlType::F16>(row, a_f, w.n_cols);
                    break;
                case GgmlType::BF16:
                    yt[r] = DotFloat<GgmlType::BF16>(row, a_f, w.n_cols);
                    break;
                case GgmlType::F32:
                    yt[r] = DotFloat<GgmlType::F32>(row, a_f, w.n_cols);
                    break;
                default:
                    return false;
            }
        }
    }
    return true;
}

bool GemvHandles(GgmlType type) {
    switch (type) {
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q5_1:
        case GgmlType::Q8_0:
        case GgmlType::IQ4_NL:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::IQ4_XS:
        case GgmlType::Q6_K:
        case GgmlType::F16:
        case GgmlType::BF16:
        case GgmlType::F32:
            return true;
        default:
            return false;
    }
}

bool GemvRows(const WeightMatrix& w, const Activations& act, int64_t row_begin, int64_t row_end,
              float* y) {
    if (!GemvHandles(w.type)) return false;
#if HWY_TARGET == HWY_AVX3
    if (x86_vnni_available()) return GemvRowsImpl<true>(w, act, row_begin, row_end, y);
#endif
    return GemvRowsImpl<false>(w, act, row_begin, row_end, y);
}

#else  // no hand-written kernels for this target

bool GemvHandles(GgmlType) {
    return false;
}

bool GemvRows(const WeightMatrix&, const Activations&, int64_t, int64_t, float*) {
    return false;
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(GemvRows);
HWY_EXPORT(GemvHandles);

bool gemv_simd_available(GgmlType type) {
    return HWY_DYNAMIC_DISPATCH(GemvHandles)(type);
}

bool gemv_rows_simd(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                    int64_t row_end, float* y) {
    return HWY_DYNAMIC_DISPATCH(GemvRows)(w, act, row_begin, row_end, y);
}

}  // namespace minfer::kernels
#endif
