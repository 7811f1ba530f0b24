// GEMM micro-kernels over unpacked panels (matmul_internal.h), compiled once per Highway target.
// Each output vector holds kPanelRows = 16 rows of one token (or 8 on AVX2), so the result row of
// a token is one contiguous store. AVX-512 kernels are in gemm_x86_avx3-inl.h (vpdpbusd with
// AVX512-VNNI, or its exact 16-bit emulation); AVX2 has its own below; aarch64's dot products
// (sdot, usdot, usmmla) are in gemm_arm_neon-inl.h, SVE's in gemm_arm_sve-inl.h; other targets
// run portable loops that the compiler vectorizes for them.

// SVE's vectors are sizeless and cannot be array elements, which these kernels' accumulators
// are: on aarch64 they run on NEON (128-bit) also where the CPU has SVE.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS (HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/kernel_path.h"
#include "kernels/matmul_simd.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format off: the per-target header must follow highway.h
#include "kernels/gemm_arm_neon-inl.h"
#include "kernels/gemm_arm_sve-inl.h"
#include "kernels/gemm_x86_avx3-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ---- float panels: portable Highway, any vector width ----

// T tokens (x + t * x_stride) against a panel of n_cols columns. Per row and token: acc =
// MulAdd(w_k, x_k, acc) column after column, whatever T and whichever chunk of columns the panel
// holds (the accumulators start at y's values when `accumulate`), so the bits never depend on the
// batch.
template <int T>
void FloatTile(const float* HWY_RESTRICT panel, int64_t n_cols, const float* HWY_RESTRICT x,
               int64_t x_stride, float* HWY_RESTRICT y, int64_t y_stride, int n_valid_rows,
               bool accumulate) {
    const hn::ScalableTag<float> d;
    using V = hn::Vec<decltype(d)>;
    const size_t N = hn::Lanes(d);
    constexpr size_t kGroup = 4;  // vectors of rows per pass (more than one on narrow targets)
    HWY_ALIGN float out[kPanelRows];
    for (size_t r0 = 0; r0 < kPanelRows; r0 += kGroup * N) {
        const size_t nv = (kPanelRows - r0) / N < kGroup ? (kPanelRows - r0) / N : kGroup;
        V acc[T][kGroup];
        for (int t = 0; t < T; ++t) {
            for (size_t r = 0; r < kPanelRows; ++r) {
                const bool valid = static_cast<int>(r) < n_valid_rows;
                out[r] = accumulate && valid ? y[t * y_stride + static_cast<int64_t>(r)] : 0.0f;
            }
            for (size_t v = 0; v < kGroup; ++v) {
                acc[t][v] = v < nv ? hn::Load(d, out + r0 + v * N) : hn::Zero(d);
            }
        }
        for (int64_t k = 0; k < n_cols; ++k) {
            const float* w = panel + k * kPanelRows + r0;
            for (int t = 0; t < T; ++t) {
                const V xv = hn::Set(d, x[t * x_stride + k]);
                for (size_t v = 0; v < nv; ++v) {
                    acc[t][v] = hn::MulAdd(hn::Load(d, w + v * N), xv, acc[t][v]);
                }
            }
        }
        for (int t = 0; t < T; ++t) {
            for (size_t v = 0; v < nv; ++v) hn::Store(acc[t][v], d, out + r0 + v * N);
            float* dst = y + t * y_stride;
            for (size_t r = r0; r < r0 + nv * N; ++r) {
                if (static_cast<int>(r) < n_valid_rows) dst[r] = out[r];
            }
        }
    }
}

void GemmFloatPanel(const float* panel, int64_t n_cols, const float* x, int64_t x_stride,
                    int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                    bool accumulate) {
    int64_t t = 0;
    auto run = [&](auto tile, int count) {
        tile(panel, n_cols, x + t * x_stride, x_stride, y + t * y_stride, y_stride, n_valid_rows,
             accumulate);
        t += count;
    };
    // Tiles of 8 tokens only where a panel's 16 rows are one vector: with two (AVX2) their 16
    // accumulators spill (Qwen2 0.5B F16 --no-repack on a Zen 4 without AVX-512: pp512 113 ->
    // 156-159 tokens/s with tiles of 4). Each row and token is its own chain either way.
    if (hn::Lanes(hn::ScalableTag<float>()) >= kPanelRows) {
        while (t + 8 <= n_tokens) run(FloatTile<8>, 8);
    }
    while (t + 4 <= n_tokens) run(FloatTile<4>, 4);
    if (t + 2 <= n_tokens) run(FloatTile<2>, 2);
    if (t < n_tokens) run(FloatTile<1>, 1);
}

// ---- integer panels (see matmul_internal.h for the arithmetic) ----

#if HWY_TARGET == HWY_AVX3

// GemmIntPanelsAvx3 (gemm_x86_avx3-inl.h), one panel or two at once.

#elif HWY_TARGET == HWY_AVX2

// AVX2 has no vpdpbusd, and vpmaddubsw would saturate on the +128 weights; so the weights go
// back to signed (xor 0x80) and use |w| x sign(a, w) (pairs below 2^15), summing exact signed
// products: the dots start at 0, not at the +128 correction. Half a panel (8 rows, one vector)
// and up to 4 tokens at a time fit the 16 vector registers.
template <int T, int kSub>
HWY_INLINE void SubBlockDotsAvx2(const uint8_t* q, const int8_t* act, int width,
                                 __m256i (&dot)[T]) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < T; ++t) dot[t] = _mm256_setzero_si256();
    for (int g = 0; g < kSub / 4; ++g) {
        const __m256i w = _mm256_xor_si256(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(q + g * 4 * kPanelRows)), flip);
        const __m256i w_abs = _mm256_abs_epi8(w);
        for (int t = 0; t < T; ++t) {
            int32_t four;
            std::memcpy(&four, act + (g * width + t) * 4, 4);
            const __m256i pairs =
                _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(_mm256_set1_epi32(four), w));
            dot[t] = _mm256_add_epi32(dot[t], _mm256_madd_epi16(pairs, ones));
        }
    }
}

inline __m256 Load8(const float* p) {
    return _mm256_load_ps(p);
}
inline __m256i Load8(const int32_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

// Rows [8 * half, 8 * half + 8) of the panel times tokens slot0 .. slot0 + T - 1 of a tile; the
// panel's block 0 is block block0 of the activations. Per row and token the float operations are
// those of the AVX-512 kernels, in the same order, whatever T.
template <int T, int kSub, int kSubs, bool kMin>
void HalfTile(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t tile, int slot0,
              float* y, int64_t y_stride, int n_valid_rows, bool accumulate, int half) {
    const int r0 = 8 * half;
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(n_valid_rows - r0), lane);
    __m256 acc[T];
    for (int t = 0; t < T; ++t) {
        acc[t] = accumulate ? _mm256_maskload_ps(y + t * y_stride + r0, mask) : _mm256_setzero_ps();
    }
    const int8_t* act = a.q_tile(tile) + slot0 * 4;
    const float* d = a.d + a.block_tile(tile) + slot0;
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        const int64_t ab = block0 + b;  // block of the activation row
        __m256i isum[T];
        for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
        for (int j = 0; j < kSubs; ++j) {
            const int64_t s = b * kSubs + j, as = ab * kSubs + j;
            __m256i dot[T];
            SubBlockDotsAvx2<T, kSub>(p.q + s * kSub * kPanelRows + 4 * r0,
                                      act + as * kSub * a.width, a.width, dot);
            if constexpr (kSubs == 1) {
                for (int t = 0; t < T; ++t) isum[t] = dot[t];
                continue;
            }
            const __m256i scale = Load8(p.scale + s * kPanelRows + r0);
            for (int t = 0; t < T; ++t) {
                isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(dot[t], scale));
            }
        }
        const __m256 dw = Load8(p.d + b * kPanelRows + r0);
        if constexpr (kSubs == 1) {
            for (int t = 0; t < T; ++t) {
                const __m256 sd = _mm256_mul_ps(dw, _mm256_set1_ps(d[ab * a.width + t]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), sd, acc[t]);
            }
            if constexpr (kMin) {
                const __m256 offset = Load8(p.min_scale + b * kPanelRows + r0);
                const float* sum = a.sum + a.block_tile(tile) + ab * a.width + slot0;
                for (int t = 0; t < T; ++t) {
                    acc[t] = _mm256_fmadd_ps(offset, _mm256_set1_ps(sum[t]), acc[t]);
                }
            }
        } else if constexpr (kMin) {
            __m256i msum[T];
            for (int t = 0; t < T; ++t) msum[t] = _mm256_setzero_si256();
            const int32_t* bsum =
                a.bsum + a.pair_tile(tile) + ab * (kSubs / 2) * a.width + slot0;
            for (int j = 0; j < kSubs / 2; ++j) {
                const __m256i mins = Load8(p.mins + (b * (kSubs / 2) + j) * kPanelRows + r0);
                for (int t = 0; t < T; ++t) {
                    msum[t] = _mm256_add_epi32(
                        msum[t],
                        _mm256_madd_epi16(mins, _mm256_set1_epi32(bsum[j * a.width + t])));
                }
            }
            const __m256 neg_dmin = Load8(p.min_scale + b * kPanelRows + r0);
            for (int t = 0; t < T; ++t) {
                const __m256 block =
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum[t]), neg_dmin,
                                    _mm256_mul_ps(_mm256_cvtepi32_ps(isum[t]), dw));
                acc[t] = _mm256_fmadd_ps(block, _mm256_set1_ps(d[ab * a.width + t]), acc[t]);
            }
        } else {
            for (int t = 0; t < T; ++t) {
                const __m256 sd = _mm256_mul_ps(dw, _mm256_set1_ps(d[ab * a.width + t]));
                acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), sd, acc[t]);
            }
        }
    }
    for (int t = 0; t < T; ++t) _mm256_maskstore_ps(y + t * y_stride + r0, mask, acc[t]);
}

template <int kSub, int kSubs, bool kMin>
void IntPanelAllTokens(const IntPanel& p, const IntActivations& a, int64_t block0,
                       int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                       bool accumulate) {
    for (int half = 0; half < 2 && 8 * half < n_valid_rows; ++half) {
        ForEachTokenRun(a, n_tokens, [&](auto run, int64_t tile, int slot, int64_t t) HWY_ATTR {
            HalfTile<decltype(run)::value, kSub, kSubs, kMin>(p, a, block0, tile, slot,
                                                              y + t * y_stride, y_stride,
                                                              n_valid_rows, accumulate, half);
        });
    }
}

void GemmIntPanel(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t n_tokens,
                  float* y, int64_t y_stride, int n_valid_rows, bool accumulate) {
    auto all = [&](auto kernel) {
        kernel(p, a, block0, n_tokens, y, y_stride, n_valid_rows, accumulate);
    };
    if (p.subs_per_block == 1) {
        return p.has_min ? all(IntPanelAllTokens<32, 1, true>)
                         : all(IntPanelAllTokens<32, 1, false>);
    }
    if (p.sub_size == 32) {
        return p.has_min ? all(IntPanelAllTokens<32, 8, true>)
                         : all(IntPanelAllTokens<32, 8, false>);
    }
    return p.has_min ? all(IntPanelAllTokens<16, 16, true>) : all(IntPanelAllTokens<16, 16, false>);
}

#else  // portable loops

// a * b + c: fused on aarch64, as the NEON kernels compute it (left to itself the compiler fuses
// some products of these loops and not others, as it sees fit), rounded twice elsewhere (the x86
// targets that run these loops have no FMA).
HWY_INLINE float MulAdd(float a, float b, float c) {
#if HWY_ARCH_ARM_A64
    return std::fma(a, b, c);
#else
    return a * b + c;
#endif
}

// One token at a time, so every token count runs the same operations per row and token.
void GemmIntPanelLoops(const IntPanel& p, const IntActivations& a, int64_t block0,
                       int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                       bool accumulate) {
    const int sub = p.sub_size;
    const int subs = p.subs_per_block;
    for (int64_t t = 0; t < n_tokens; ++t) {
        const int64_t tile = t / a.width;
        const int slot = static_cast<int>(t % a.width);
        const int8_t* act = a.q_tile(tile);
        float acc[kPanelRows] = {};
        for (int r = 0; accumulate && r < n_valid_rows; ++r) acc[r] = y[t * y_stride + r];
        for (int64_t b = 0; b < p.n_blocks; ++b) {
            const int64_t ab = block0 + b;  // block of the activation row
            int32_t isum[kPanelRows] = {};
            for (int j = 0; j < subs; ++j) {
                const int64_t s = b * subs + j, as = ab * subs + j;
                const int32_t corr = a.corr[a.sub_tile(tile) + as * a.width + slot];
                for (int r = 0; r < kPanelRows; ++r) {
                    int32_t dot = corr;
                    for (int g = 0; g < sub / 4; ++g) {
                        const int8_t* a4 = act + ((as * sub / 4 + g) * a.width + slot) * 4;
                        const uint8_t* w4 = p.q + ((s * sub / 4 + g) * kPanelRows + r) * 4;
                        dot += w4[0] * a4[0] + w4[1] * a4[1] + w4[2] * a4[2] + w4[3] * a4[3];
                    }
                    isum[r] += subs == 1 ? dot : dot * p.scale[s * kPanelRows + r];
                }
            }
            const float da = a.d[a.block_tile(tile) + ab * a.width + slot];
            const float* dw = p.d + b * kPanelRows;
            const float* min_scale = p.min_scale + b * kPanelRows;
            if (subs == 1) {
                const float sum =
                    p.has_min ? a.sum[a.block_tile(tile) + ab * a.width + slot] : 0;
                for (int r = 0; r < kPanelRows; ++r) {
                    acc[r] = MulAdd(static_cast<float>(isum[r]), dw[r] * da, acc[r]);
                    if (p.has_min) acc[r] = MulAdd(min_scale[r], sum, acc[r]);
                }
                continue;
            }
            int32_t msum[kPanelRows] = {};
            for (int j = 0; p.has_min && j < subs / 2; ++j) {
                const int64_t pair = b * subs / 2 + j, apair = ab * subs / 2 + j;
                const int32_t bsum = a.bsum[a.pair_tile(tile) + apair * a.width + slot];
                for (int r = 0; r < kPanelRows; ++r) {
                    const int32_t mins = p.mins[pair * kPanelRows + r];
                    msum[r] +=
                        static_cast<int16_t>(mins & 0xFFFF) * static_cast<int16_t>(bsum & 0xFFFF) +
                        static_cast<int16_t>(mins >> 16) * static_cast<int16_t>(bsum >> 16);
                }
            }
            for (int r = 0; r < kPanelRows; ++r) {
                float block = dw[r] * static_cast<float>(isum[r]);
                if (p.has_min) block = MulAdd(min_scale[r], static_cast<float>(msum[r]), block);
                acc[r] = MulAdd(da, block, acc[r]);
            }
        }
        for (int r = 0; r < n_valid_rows; ++r) y[t * y_stride + r] = acc[r];
    }
}

void GemmIntPanel(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t n_tokens,
                  float* y, int64_t y_stride, int n_valid_rows, bool accumulate) {
#ifdef MINFER_GEMM_ARM_NEON
    // The same bits as the loops below, with the CPU's dot products: SVE's on 8 or 16 rows per
    // vector where its vectors are that long (gemm_arm_sve-inl.h), else NEON's
    // (gemm_arm_neon-inl.h).
    if (arm_sve_kernel_bits() != 0) {
        return GemmIntPanelSve(p, a, block0, n_tokens, y, y_stride, n_valid_rows, accumulate);
    }
    switch (arm_extensions()) {
        case ArmExtensions::kI8mm:
            return GemmIntPanelNeon<ArmDot::kUsmmla>(p, a, block0, n_tokens, y, y_stride,
                                                     n_valid_rows, accumulate);
        case ArmExtensions::kDotProd:
            return GemmIntPanelNeon<ArmDot::kSdot>(p, a, block0, n_tokens, y, y_stride,
                                                   n_valid_rows, accumulate);
        case ArmExtensions::kNone:
            break;
    }
#endif
    GemmIntPanelLoops(p, a, block0, n_tokens, y, y_stride, n_valid_rows, accumulate);
}

#endif

// Panels of consecutive rows, one after the other where the target has no kernel for two at once.
void GemmIntPanels(const IntPanel* p, int n_panels, const IntActivations& a, int64_t block0,
                   int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                   bool accumulate) {
#if HWY_TARGET == HWY_AVX3
    GemmIntPanelsAvx3(p, n_panels, a, block0, n_tokens, y, y_stride, n_valid_rows, accumulate);
#else
    for (int i = 0; i < n_panels; ++i) {
        GemmIntPanel(p[i], a, block0, n_tokens, y + i * kPanelRows, y_stride,
                     PanelValidRows(n_valid_rows, i), accumulate);
    }
#endif
}

// The name of what GemmIntPanels runs on this target (matmul_kernel_name).
const char* GemmIntPanelName() {
#if HWY_TARGET == HWY_AVX3
    return x86_vnni_available() ? "AVX3 VNNI" : "AVX3";
#elif HWY_TARGET == HWY_AVX2
    return "AVX2";
#elif defined(MINFER_GEMM_ARM_NEON)
    if (arm_sve_kernel_bits() == 256) return "SVE 256-bit (sdot)";
    if (arm_sve_kernel_bits() == 512) return "SVE 512-bit (sdot)";
    switch (arm_extensions()) {
        case ArmExtensions::kI8mm:
            return "NEON I8MM (usmmla, usdot)";
        case ArmExtensions::kDotProd:
            return "NEON DOTPROD (sdot)";
        case ArmExtensions::kNone:
            break;
    }
    return "NEON (portable loops)";
#else
    static const std::string name = std::string(hwy::TargetName(HWY_TARGET)) + " (portable loops)";
    return name.c_str();
#endif
}

// The name of the target GemmFloatPanel runs on.
const char* GemmFloatPanelName() {
    return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(GemmIntPanels);
HWY_EXPORT(GemmFloatPanel);
HWY_EXPORT(GemmIntPanelName);
HWY_EXPORT(GemmFloatPanelName);

std::string gemm_panel_kernel_name(bool float_weights) {
    return float_weights ? HWY_DYNAMIC_DISPATCH(GemmFloatPanelName)()
                         : HWY_DYNAMIC_DISPATCH(GemmIntPanelName)();
}

void gemm_int_panels_simd(const IntPanel* panels, int n_panels, const IntActivations& act,
                          int64_t block_begin, int64_t n_tokens, float* y, int64_t y_stride,
                          int n_valid_rows, bool accumulate) {
    HWY_DYNAMIC_DISPATCH(GemmIntPanels)
    (panels, n_panels, act, block_begin, n_tokens, y, y_stride, n_valid_rows, accumulate);
}

void gemm_int_panel_simd(const IntPanel& panel, const IntActivations& act, int64_t block_begin,
                         int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                         bool accumulate) {
    gemm_int_panels_simd(&panel, 1, act, block_begin, n_tokens, y, y_stride, n_valid_rows,
                         accumulate);
}

void gemm_float_panel_simd(const float* panel, int64_t n_cols, const float* x, int64_t x_stride,
                           int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                           bool accumulate) {
    HWY_DYNAMIC_DISPATCH(GemmFloatPanel)(panel, n_cols, x, x_stride, n_tokens, y, y_stride,
                                         n_valid_rows, accumulate);
}

}  // namespace minfer::kernels
#endif
