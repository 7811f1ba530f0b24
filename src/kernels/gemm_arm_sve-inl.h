// The integer GEMM panel kernel of aarch64 CPUs with 256- or 512-bit SVE (Neoverse V1 / Graviton
// 3, A64FX): SVE's dot product (sdot, indexed by token within each 128-bit segment) on 8 or 16
// rows of a panel per vector, where NEON's takes 4. Per row and token the integer sums are exact
// and the float operations are those of the NEON kernel and the portable loops
// (gemm_arm_neon-inl.h, gemm_simd.cpp), in the same order and fused alike, so all give the same
// bits. SVE's vectors are sizeless: they cannot be array elements, so the T <= 4 tokens'
// accumulators are named variables (MINFER_SVE_TOKENS). The functions carry target("+sve") and run
// only where arm_sve_kernel_bits() says the CPU has SVE of that length. Per-target code: included
// by gemm_simd.cpp once per Highway target (NEON on aarch64 only).

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GEMM_ARM_SVE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GEMM_ARM_SVE_INL_H_
#undef MINFER_KERNELS_GEMM_ARM_SVE_INL_H_
#else
#define MINFER_KERNELS_GEMM_ARM_SVE_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "kernels/matmul_internal.h"

// Defined anew for each target (the file is included once per target).
#undef MINFER_GEMM_ARM_SVE
#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#include <arm_sve.h>
#define MINFER_GEMM_ARM_SVE 1
#endif

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#ifdef MINFER_GEMM_ARM_SVE

#define MINFER_SVE_ATTR __attribute__((target("+sve")))
// X(t) for the tokens t of a tile, each of the 4 named accumulators guarded by t < T.
#define MINFER_SVE_TOKENS(X) X(0) X(1) X(2) X(3)

// Rows [r0, r0 + svcntw()) of the panel times tokens slot0 .. slot0 + T - 1 of a tile; the panel's
// block 0 is block block0 of the activations.
template <int T, int kSub, int kSubs, bool kMin>
MINFER_SVE_ATTR void RowsTileSve(const IntPanel& p, const IntActivations& a, int64_t block0,
                                 int64_t tile, int slot0, float* y, int64_t y_stride,
                                 int n_valid_rows, bool accumulate, int r0) {
    const svbool_t all8 = svptrue_b8(), all = svptrue_b32();
    const svbool_t valid = svwhilelt_b32(r0, n_valid_rows);
    const svbool_t start = accumulate ? valid : svpfalse_b();
    // The tokens' 4 bytes of a group, 4T bytes, in each 128-bit segment.
    const svbool_t token_bytes = svwhilelt_b8(0, 4 * T);
#define MINFER_SVE_INIT(t)               \
    svfloat32_t acc##t = svdup_n_f32(0); \
    if constexpr (t < T) acc##t = svld1_f32(start, y + t * y_stride + r0);
    MINFER_SVE_TOKENS(MINFER_SVE_INIT)
#undef MINFER_SVE_INIT
    const int8_t* act = a.q_tile(tile);
    const float* da = a.d + a.block_tile(tile) + slot0;
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        const int64_t ab = block0 + b;  // block of the activation row
        svint32_t isum0 = svdup_n_s32(0), isum1 = isum0, isum2 = isum0, isum3 = isum0;
        for (int j = 0; j < kSubs; ++j) {
            const int64_t s = b * kSubs + j, as = ab * kSubs + j;
            svint32_t dot0 = svdup_n_s32(0), dot1 = dot0, dot2 = dot0, dot3 = dot0;
            const uint8_t* q = p.q + s * kSub * kPanelRows + 4 * r0;
            const int8_t* act_sub = act + (as * kSub / 4 * a.width + slot0) * 4;
            for (int g = 0; g < kSub / 4; ++g) {
                // The panel's codes are value + 128: back to the signed values.
                const svint8_t w = svreinterpret_s8_u8(
                    sveor_n_u8_x(all8, svld1_u8(all8, q + g * 4 * kPanelRows), 0x80));
                const svint8_t tokens = svld1rq_s8(token_bytes, act_sub + g * a.width * 4);
#define MINFER_SVE_DOT(t) \
    if constexpr (t < T) dot##t = svdot_lane_s32(dot##t, w, tokens, t);
                MINFER_SVE_TOKENS(MINFER_SVE_DOT)
#undef MINFER_SVE_DOT
            }
            if constexpr (kSubs == 1) {
                isum0 = dot0, isum1 = dot1, isum2 = dot2, isum3 = dot3;
            } else {
                const svint32_t scale = svld1_s32(all, p.scale + s * kPanelRows + r0);
#define MINFER_SVE_SCALE(t)                                                                      \
    if constexpr (t < T) {                                                                       \
        isum##t =                                                                                \
            j == 0 ? svmul_s32_x(all, dot##t, scale) : svmla_s32_x(all, isum##t, dot##t, scale); \
    }
                MINFER_SVE_TOKENS(MINFER_SVE_SCALE)
#undef MINFER_SVE_SCALE
            }
        }
        const svfloat32_t dw = svld1_f32(all, p.d + b * kPanelRows + r0);
        if constexpr (kSubs == 1) {
            // acc = fma(float(isum), dw * da, acc), then fma(min_scale, s_a, acc)
            const float* sum = kMin ? a.sum + a.block_tile(tile) + ab * a.width + slot0 : nullptr;
            const svfloat32_t offset =
                kMin ? svld1_f32(all, p.min_scale + b * kPanelRows + r0) : svdup_n_f32(0);
#define MINFER_SVE_BLOCK32(t)                                                    \
    if constexpr (t < T) {                                                       \
        const svfloat32_t scale = svmul_n_f32_x(all, dw, da[ab * a.width + t]);  \
        acc##t = svmla_f32_x(all, acc##t, svcvt_f32_s32_x(all, isum##t), scale); \
        if constexpr (kMin) acc##t = svmla_n_f32_x(all, acc##t, offset, sum[t]); \
    }
            MINFER_SVE_TOKENS(MINFER_SVE_BLOCK32)
#undef MINFER_SVE_BLOCK32
        } else {
            // block = dw * float(isum) [then fma(min_scale, float(msum), block)];
            // acc = fma(da, block, acc)
            const int32_t* bsum =
                kMin ? a.bsum + a.pair_tile(tile) + ab * (kSubs / 2) * a.width + slot0 : nullptr;
#define MINFER_SVE_SUPER(t)                                                                     \
    if constexpr (t < T) {                                                                      \
        svfloat32_t block = svmul_f32_x(all, dw, svcvt_f32_s32_x(all, isum##t));                \
        if constexpr (kMin) {                                                                   \
            svint32_t msum = svdup_n_s32(0);                                                    \
            for (int j = 0; j < kSubs / 2; ++j) {                                               \
                /* two int16 mins per row times the two int16 sums of the token */              \
                const svint32_t mins =                                                          \
                    svld1_s32(all, p.mins + (b * (kSubs / 2) + j) * kPanelRows + r0);           \
                const int32_t pair = bsum[j * a.width + t];                                     \
                const auto lo = static_cast<int16_t>(pair & 0xFFFF);                            \
                const auto hi = static_cast<int16_t>(pair >> 16);                               \
                msum = svmla_n_s32_x(all, msum,                                                 \
                                     svasr_n_s32_x(all, svlsl_n_s32_x(all, mins, 16), 16), lo); \
                msum = svmla_n_s32_x(all, msum, svasr_n_s32_x(all, mins, 16), hi);              \
            }                                                                                   \
            block = svmla_f32_x(all, block, svld1_f32(all, p.min_scale + b * kPanelRows + r0),  \
                                svcvt_f32_s32_x(all, msum));                                    \
        }                                                                                       \
        acc##t = svmla_n_f32_x(all, acc##t, block, da[ab * a.width + t]);                       \
    }
            MINFER_SVE_TOKENS(MINFER_SVE_SUPER)
#undef MINFER_SVE_SUPER
        }
    }
#define MINFER_SVE_STORE(t) \
    if constexpr (t < T) svst1_f32(valid, y + t * y_stride + r0, acc##t);
    MINFER_SVE_TOKENS(MINFER_SVE_STORE)
#undef MINFER_SVE_STORE
}

template <int kSub, int kSubs, bool kMin>
MINFER_SVE_ATTR void IntPanelSve(const IntPanel& p, const IntActivations& a, int64_t block0,
                                 int64_t n_tokens, float* y, int64_t y_stride, int n_valid_rows,
                                 bool accumulate) {
    const int rows = static_cast<int>(svcntw());  // per vector: 8 or 16
    for (int r0 = 0; r0 < kPanelRows && r0 < n_valid_rows; r0 += rows) {
        ForEachTokenRun(
            a, n_tokens, [&](auto run, int64_t tile, int slot, int64_t t) MINFER_SVE_ATTR {
                RowsTileSve<decltype(run)::value, kSub, kSubs, kMin>(p, a, block0, tile, slot,
                                                                     y + t * y_stride, y_stride,
                                                                     n_valid_rows, accumulate, r0);
            });
    }
}

void GemmIntPanelSve(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t n_tokens,
                     float* y, int64_t y_stride, int n_valid_rows, bool accumulate) {
    auto all = [&](auto kernel) {
        kernel(p, a, block0, n_tokens, y, y_stride, n_valid_rows, accumulate);
    };
    if (p.subs_per_block == 1) {
        return p.has_min ? all(IntPanelSve<32, 1, true>) : all(IntPanelSve<32, 1, false>);
    }
    if (p.sub_size == 32) {
        return p.has_min ? all(IntPanelSve<32, 8, true>) : all(IntPanelSve<32, 8, false>);
    }
    return p.has_min ? all(IntPanelSve<16, 16, true>) : all(IntPanelSve<16, 16, false>);
}

#undef MINFER_SVE_TOKENS
#undef MINFER_SVE_ATTR

#endif  // MINFER_GEMM_ARM_SVE

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
