// GEMM micro-kernels over unpacked panels (matmul_internal.h), compiled once per Highway target.
// Each output vector holds kPanelRows = 16 rows of one token, so the result row of a token is one
// contiguous store. AVX-512 uses vpdpbusd (AVX512-VNNI, through inline assembly so that the rest
// of the target needs no extra compiler flags) or its exact 16-bit emulation; other targets run
// portable loops that the compiler vectorizes for them.

#include <algorithm>
#include <cstring>

#include "kernels/kernel_path.h"
#include "kernels/matmul_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- float panels: portable Highway, any vector width ----

template <int T>
void FloatTile(const float* HWY_RESTRICT panel, const float* HWY_RESTRICT x, int64_t n_cols,
               int64_t t0, float* HWY_RESTRICT y, int64_t y_stride, int n_valid_rows) {
    const hn::ScalableTag<float> d;
    using V = hn::Vec<decltype(d)>;
    const size_t N = hn::Lanes(d);
    constexpr size_t kGroup = 4;  // vectors of rows per pass (more than one on narrow targets)
    HWY_ALIGN float out[kPanelRows];
    for (size_t r0 = 0; r0 < kPanelRows; r0 += kGroup * N) {
        const size_t nv = (kPanelRows - r0) / N < kGroup ? (kPanelRows - r0) / N : kGroup;
        V acc[T][kGroup];
        for (int t = 0; t < T; ++t) {
            for (size_t v = 0; v < kGroup; ++v) acc[t][v] = hn::Zero(d);
        }
        for (int64_t k = 0; k < n_cols; ++k) {
            const float* w = panel + k * kPanelRows + r0;
            for (int t = 0; t < T; ++t) {
                const V xv = hn::Set(d, x[(t0 + t) * n_cols + k]);
                for (size_t v = 0; v < nv; ++v) {
                    acc[t][v] = hn::MulAdd(hn::Load(d, w + v * N), xv, acc[t][v]);
                }
            }
        }
        for (int t = 0; t < T; ++t) {
            for (size_t v = 0; v < nv; ++v) hn::Store(acc[t][v], d, out + r0 + v * N);
            float* dst = y + (t0 + t) * y_stride;
            for (size_t r = r0; r < r0 + nv * N; ++r) {
                if (static_cast<int>(r) < n_valid_rows) dst[r] = out[r];
            }
        }
    }
}

void GemmFloatPanel(const float* panel, const float* x, int64_t n_cols, int64_t n_tokens, float* y,
                    int64_t y_stride, int n_valid_rows) {
    int64_t t = 0;
    for (; t + 8 <= n_tokens; t += 8) FloatTile<8>(panel, x, n_cols, t, y, y_stride, n_valid_rows);
    for (; t + 4 <= n_tokens; t += 4) FloatTile<4>(panel, x, n_cols, t, y, y_stride, n_valid_rows);
    for (; t < n_tokens; ++t) FloatTile<1>(panel, x, n_cols, t, y, y_stride, n_valid_rows);
}

// ---- integer panels ----
// y[t][r] = sum over sub-blocks s of scale[s][r] * d[s][t] * (sum_i (q + 128) * a + corr[s][t])
//           + offset[s][r] * sum[s][t]

#if HWY_TARGET == HWY_AVX3

// acc += per 32-bit lane, the 4 products of unsigned bytes of w with the signed bytes `four`
// (broadcast to every lane from memory, so it costs no extra instruction).
inline __m512i DpbusdVnni(__m512i acc, __m512i w_u8, const int8_t* four) {
    asm("vpdpbusd %[a]%{1to16%}, %[w], %[acc]"
        : [acc] "+v"(acc)
        : [w] "v"(w_u8), [a] "m"(*reinterpret_cast<const int32_t*>(four)));
    return acc;
}

// The same without VNNI, exactly, through 16-bit products.
inline __m512i DpbusdEmulated(__m512i acc, __m512i w_u8, const int8_t* four) {
    int32_t bytes;
    std::memcpy(&bytes, four, 4);
    const __m512i a = _mm512_set1_epi32(bytes);
    const __m512i w_even = _mm512_and_si512(w_u8, _mm512_set1_epi16(0x00FF));
    const __m512i w_odd = _mm512_srli_epi16(w_u8, 8);
    const __m512i a_even = _mm512_srai_epi16(_mm512_slli_epi16(a, 8), 8);
    const __m512i a_odd = _mm512_srai_epi16(a, 8);
    acc = _mm512_add_epi32(acc, _mm512_madd_epi16(w_even, a_even));
    return _mm512_add_epi32(acc, _mm512_madd_epi16(w_odd, a_odd));
}

template <int T, int kSub, bool kVnni>
void IntTile(const IntPanel& p, const IntActivations& a, int64_t tile, int64_t t0, float* y,
             int64_t y_stride, int n_valid_rows) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    const int8_t* act = a.q_tile(tile);
    const int64_t sub_base = a.sub_tile(tile);
    for (int64_t s = 0; s < p.n_sub; ++s) {
        const int32_t* corr = a.corr + sub_base + s * kTokenTile;
        __m512i iacc[T];
        for (int t = 0; t < T; ++t) iacc[t] = _mm512_set1_epi32(corr[t]);
        const uint8_t* q = p.q + s * kSub * kPanelRows;
        const int8_t* as = act + s * kSub * kTokenTile;
        for (int g = 0; g < kSub / 4; ++g) {
            const __m512i wv = _mm512_load_si512(q + g * 64);
            for (int t = 0; t < T; ++t) {
                const int8_t* four = as + g * 4 * kTokenTile + t * 4;
                iacc[t] = kVnni ? DpbusdVnni(iacc[t], wv, four) : DpbusdEmulated(iacc[t], wv, four);
            }
        }
        const __m512 scale = _mm512_load_ps(p.scale + s * kPanelRows);
        const float* d = a.d + sub_base + s * kTokenTile;
        for (int t = 0; t < T; ++t) {
            const __m512 sd = _mm512_mul_ps(scale, _mm512_set1_ps(d[t]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[t]), sd, acc[t]);
        }
        if (p.has_min) {
            const __m512 offset = _mm512_load_ps(p.offset + s * kPanelRows);
            const float* sum = a.sum + sub_base + s * kTokenTile;
            for (int t = 0; t < T; ++t) {
                acc[t] = _mm512_fmadd_ps(offset, _mm512_set1_ps(sum[t]), acc[t]);
            }
        }
    }
    const __mmask16 mask = static_cast<__mmask16>((1u << n_valid_rows) - 1u);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * y_stride, mask, acc[t]);
}

template <int kSub, bool kVnni>
void IntPanelAllTokens(const IntPanel& p, const IntActivations& a, int64_t n_tokens, float* y,
                       int64_t y_stride, int n_valid_rows) {
    for (int64_t t0 = 0; t0 < n_tokens; t0 += kTokenTile) {
        const int64_t tile = t0 / kTokenTile;
        switch (n_tokens - t0 < kTokenTile ? n_tokens - t0 : kTokenTile) {
            case 8:
                IntTile<8, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            case 7:
                IntTile<7, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            case 6:
                IntTile<6, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            case 5:
                IntTile<5, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            case 4:
                IntTile<4, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            case 3:
                IntTile<3, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            case 2:
                IntTile<2, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
            default:
                IntTile<1, kSub, kVnni>(p, a, tile, t0, y, y_stride, n_valid_rows);
                break;
        }
    }
}

void GemmIntPanel(const IntPanel& p, const IntActivations& a, int64_t n_tokens, float* y,
                  int64_t y_stride, int n_valid_rows) {
    const bool vnni = x86_vnni_available();
    if (p.sub_size == 32) {
        if (vnni) return IntPanelAllTokens<32, true>(p, a, n_tokens, y, y_stride, n_valid_rows);
        return IntPanelAllTokens<32, false>(p, a, n_tokens, y, y_stride, n_valid_rows);
    }
    if (vnni) return IntPanelAllTokens<16, true>(p, a, n_tokens, y, y_stride, n_valid_rows);
    return IntPanelAllTokens<16, false>(p, a, n_tokens, y, y_stride, n_valid_rows);
}

#elif HWY_TARGET == HWY_AVX2

// AVX2 has no vpdpbusd, and vpmaddubsw would saturate on the +128 weights; so the weights go
// back to signed (xor 0x80) and use |w| x sign(a, w) (pairs below 2^15), summing exact signed
// products: the accumulator starts at 0, not at the +128 correction. Half a panel (8 rows, one
// vector) and 4 tokens at a time fit the 16 vector registers.
template <int T, int kSub>
void IntTileHalf(const IntPanel& p, const IntActivations& a, int64_t tile, int slot0, int64_t t0,
                 float* y, int64_t y_stride, int n_valid_rows, int half) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    const int8_t* act = a.q_tile(tile);
    const int64_t sub_base = a.sub_tile(tile);
    for (int64_t s = 0; s < p.n_sub; ++s) {
        __m256i iacc[T];
        for (int t = 0; t < T; ++t) iacc[t] = _mm256_setzero_si256();
        const uint8_t* q = p.q + s * kSub * kPanelRows + 32 * half;
        const int8_t* as = act + s * kSub * kTokenTile;
        for (int g = 0; g < kSub / 4; ++g) {
            const __m256i w = _mm256_xor_si256(
                _mm256_load_si256(reinterpret_cast<const __m256i*>(q + g * 64)), flip);
            const __m256i w_abs = _mm256_abs_epi8(w);
            for (int t = 0; t < T; ++t) {
                int32_t four;
                std::memcpy(&four, as + (g * kTokenTile + slot0 + t) * 4, 4);
                const __m256i av = _mm256_set1_epi32(four);
                const __m256i pairs = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(av, w));
                iacc[t] = _mm256_add_epi32(iacc[t], _mm256_madd_epi16(pairs, ones));
            }
        }
        const __m256 scale = _mm256_loadu_ps(p.scale + s * kPanelRows + 8 * half);
        const float* d = a.d + sub_base + s * kTokenTile + slot0;
        for (int t = 0; t < T; ++t) {
            const __m256 sd = _mm256_mul_ps(scale, _mm256_set1_ps(d[t]));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[t]), sd, acc[t]);
        }
        if (p.has_min) {
            const __m256 offset = _mm256_loadu_ps(p.offset + s * kPanelRows + 8 * half);
            const float* sum = a.sum + sub_base + s * kTokenTile + slot0;
            for (int t = 0; t < T; ++t) {
                acc[t] = _mm256_fmadd_ps(offset, _mm256_set1_ps(sum[t]), acc[t]);
            }
        }
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid_rows - 8 * half), lane);
    for (int t = 0; t < T; ++t) {
        _mm256_maskstore_ps(y + (t0 + t) * y_stride + 8 * half, mask, acc[t]);
    }
}

template <int kSub>
void IntPanelAllTokens(const IntPanel& p, const IntActivations& a, int64_t n_tokens, float* y,
                       int64_t y_stride, int n_valid_rows) {
    for (int half = 0; half < 2 && 8 * half < n_valid_rows; ++half) {
        for (int64_t t = 0; t < n_tokens;) {
            const int64_t tile = t / kTokenTile;
            const int slot = static_cast<int>(t % kTokenTile);
            const int64_t left = std::min<int64_t>(n_tokens - t, kTokenTile - slot);
            if (left >= 4) {
                IntTileHalf<4, kSub>(p, a, tile, slot, t, y, y_stride, n_valid_rows, half);
                t += 4;
            } else if (left >= 2) {
                IntTileHalf<2, kSub>(p, a, tile, slot, t, y, y_stride, n_valid_rows, half);
                t += 2;
            } else {
                IntTileHalf<1, kSub>(p, a, tile, slot, t, y, y_stride, n_valid_rows, half);
                t += 1;
            }
        }
    }
}

void GemmIntPanel(const IntPanel& p, const IntActivations& a, int64_t n_tokens, float* y,
                  int64_t y_stride, int n_valid_rows) {
    if (p.sub_size == 32) return IntPanelAllTokens<32>(p, a, n_tokens, y, y_stride, n_valid_rows);
    return IntPanelAllTokens<16>(p, a, n_tokens, y, y_stride, n_valid_rows);
}

#else  // portable loops

void GemmIntPanel(const IntPanel& p, const IntActivations& a, int64_t n_tokens, float* y,
                  int64_t y_stride, int n_valid_rows) {
    const int sub = p.sub_size;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t tile = t / kTokenTile;
        const int slot = static_cast<int>(t % kTokenTile);
        const int8_t* act = a.q_tile(tile);
        const int64_t sub_base = a.sub_tile(tile);
        float acc[kPanelRows] = {};
        for (int64_t s = 0; s < p.n_sub; ++s) {
            const int64_t at = sub_base + s * kTokenTile + slot;
            int32_t iacc[kPanelRows];
            for (int r = 0; r < kPanelRows; ++r) iacc[r] = a.corr[at];
            for (int g = 0; g < sub / 4; ++g) {
                const int8_t* a4 = act + ((s * sub / 4 + g) * kTokenTile + slot) * 4;
                const uint8_t* w = p.q + (s * sub / 4 + g) * kPanelRows * 4;
                for (int r = 0; r < kPanelRows; ++r) {
                    const uint8_t* w4 = w + r * 4;
                    iacc[r] += w4[0] * a4[0] + w4[1] * a4[1] + w4[2] * a4[2] + w4[3] * a4[3];
                }
            }
            for (int r = 0; r < kPanelRows; ++r) {
                acc[r] += static_cast<float>(iacc[r]) * (p.scale[s * kPanelRows + r] * a.d[at]);
            }
            if (p.has_min) {
                for (int r = 0; r < kPanelRows; ++r) {
                    acc[r] += p.offset[s * kPanelRows + r] * a.sum[at];
                }
            }
        }
        for (int r = 0; r < n_valid_rows; ++r) y[t * y_stride + r] = acc[r];
    }
}

#endif

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(GemmIntPanel);
HWY_EXPORT(GemmFloatPanel);

void gemm_int_panel_simd(const IntPanel& panel, const IntActivations& act, int64_t n_tokens,
                         float* y, int64_t y_stride, int n_valid_rows) {
    HWY_DYNAMIC_DISPATCH(GemmIntPanel)(panel, act, n_tokens, y, y_stride, n_valid_rows);
}

void gemm_float_panel_simd(const float* panel, const float* x, int64_t n_cols, int64_t n_tokens,
                           float* y, int64_t y_stride, int n_valid_rows) {
    HWY_DYNAMIC_DISPATCH(GemmFloatPanel)(panel, x, n_cols, n_tokens, y, y_stride, n_valid_rows);
}

}  // namespace minfer::kernels
#endif
