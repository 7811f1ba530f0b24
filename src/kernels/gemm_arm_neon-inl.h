// The integer GEMM panel kernel of aarch64 (matmul_internal.h has the panel arithmetic): the
// ARMv8.2 dot product (sdot) where the CPU has it; where it has i8mm (ARMv8.6), the mixed-sign
// matrix multiply (usmmla: 2 rows x 2 tokens x 8 bytes) for two tokens or more and the mixed-sign
// dot product (usdot) for one. Per row and token the float operations are those of the portable loops in
// gemm_simd.cpp, in the same order and fused alike, and the integer sums are exact either way: the
// three paths (portable, sdot, i8mm) give the same bits, and any token count the same bits as
// one token (the batch invariance the engine relies on).
// Per-target code: included by gemm_simd.cpp once per Highway target (NEON on aarch64 only).

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GEMM_ARM_NEON_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GEMM_ARM_NEON_INL_H_
#undef MINFER_KERNELS_GEMM_ARM_NEON_INL_H_
#else
#define MINFER_KERNELS_GEMM_ARM_NEON_INL_H_
#endif

#include <cstdint>
#include <utility>

#include "hwy/highway.h"
#include "kernels/matmul_internal.h"

// Defined anew for each target (the file is included once per target).
#undef MINFER_GEMM_ARM_NEON
#if HWY_TARGET == HWY_NEON && HWY_ARCH_ARM_A64
#include <arm_neon.h>
#define MINFER_GEMM_ARM_NEON 1
#endif

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#ifdef MINFER_GEMM_ARM_NEON

// kSdot: ARMv8.2's dot product; kUsdot: i8mm's mixed-sign one; kUsmmla: i8mm's mixed-sign matrix
// multiply for two tokens or more (one token takes usdot there).
enum class ArmDot { kSdot, kUsdot, kUsmmla };

// T consecutive tokens' 4 activation bytes of one group (4 bytes per token): lane t of the
// result holds token t. Reads only the T * 4 bytes (the tile may end right after them).
template <int T>
HWY_INLINE int8x16_t LoadTokenGroups(const int8_t* p) {
    if constexpr (T == 4) return vld1q_s8(p);
    if constexpr (T == 2) return vcombine_s8(vld1_s8(p), vdup_n_s8(0));
    if constexpr (T == 1) {
        int32_t four;
        __builtin_memcpy(&four, p, 4);
        return vreinterpretq_s8_s32(vdupq_n_s32(four));
    }
}

// dot[v] += w[v] . (token kLane's 4 bytes), 4 rows per vector: sdot on the weights made signed
// (xor 0x80), or usdot on the stored value + 128 (the sum then starts at the activations'
// correction, -128 * sum(a)). Inline assembly, as x86's vpdpbusd: the intrinsics would need the
// extension in every enclosing function's target, and these functions also serve CPUs without it
// (the instructions only run where arm_extensions() says the CPU has them). The directive lets the
// assembler accept them (binutils 2.40 takes i8mm only through .arch; the rest of the file is
// assembled under it, a superset of what GCC emits: v8-a with Highway's crypto).
#define MINFER_ARM_DOT_LANE(insn, lane, acc, w, a)                                        \
    asm(".arch armv8.2-a+crypto+dotprod+i8mm\n\t" insn " %0.4s, %1.16b, %2.4b[" #lane "]" \
        : "+w"(acc)                                                                       \
        : "w"(w), "w"(a))

// acc += the 2 x 2 products of two rows' 8 bytes (w, unsigned) with two tokens' 8 bytes (a,
// signed): lanes [r.t, r.t', r'.t, r'.t'].
#define MINFER_ARM_USMMLA(acc, w, a)                                                       \
    asm(".arch armv8.2-a+crypto+dotprod+i8mm\n\tusmmla %0.4s, %1.16b, %2.16b" : "+w"(acc) \
        : "w"(w), "w"(a))

template <ArmDot kDot, int kLane>
HWY_INLINE void DotLane(int32x4_t (&dot)[2], const int8x16_t (&ws)[2], const uint8x16_t (&wu)[2],
                        int8x16_t a) {
    static_assert(kLane >= 0 && kLane < 4);
    for (int v = 0; v < 2; ++v) {
        if constexpr (kDot == ArmDot::kSdot) {
            if constexpr (kLane == 0) MINFER_ARM_DOT_LANE("sdot", 0, dot[v], ws[v], a);
            if constexpr (kLane == 1) MINFER_ARM_DOT_LANE("sdot", 1, dot[v], ws[v], a);
            if constexpr (kLane == 2) MINFER_ARM_DOT_LANE("sdot", 2, dot[v], ws[v], a);
            if constexpr (kLane == 3) MINFER_ARM_DOT_LANE("sdot", 3, dot[v], ws[v], a);
        } else {
            if constexpr (kLane == 0) MINFER_ARM_DOT_LANE("usdot", 0, dot[v], wu[v], a);
            if constexpr (kLane == 1) MINFER_ARM_DOT_LANE("usdot", 1, dot[v], wu[v], a);
            if constexpr (kLane == 2) MINFER_ARM_DOT_LANE("usdot", 2, dot[v], wu[v], a);
            if constexpr (kLane == 3) MINFER_ARM_DOT_LANE("usdot", 3, dot[v], wu[v], a);
        }
    }
}

template <ArmDot kDot, int T, std::size_t... kLanes>
HWY_INLINE void DotTokens(int32x4_t (&dot)[T][2], const int8x16_t (&ws)[2],
                          const uint8x16_t (&wu)[2], int8x16_t a, std::index_sequence<kLanes...>) {
    (DotLane<kDot, static_cast<int>(kLanes)>(dot[kLanes], ws, wu, a), ...);
}

// One sub-block of kSub columns: dot[t][v] (rows 4v .. 4v + 3 of the half tile, token t) starts
// at start[t] and adds the integer products of the panel's bytes q (groups of 4 columns: 16 rows
// x 4 bytes each, rows r0 on) with the tokens' bytes act (groups of 4 columns: width tokens x 4
// bytes each, token 0 first).
template <ArmDot kDot, int T, int kSub>
HWY_INLINE void SubBlockDots(int32x4_t (&dot)[T][2], const int32_t (&start)[T], const uint8_t* q,
                             const int8_t* act, int64_t width) {
    constexpr int kGroups = kSub / 4;
    if constexpr (kDot == ArmDot::kUsmmla && T >= 2) {
        // Two groups make the 8 bytes a matrix multiply takes per row and token: zipping the
        // 32-bit lanes of group g and g + 1 pairs rows (and tokens) with their 8 bytes.
        // mm[P][R]: tokens 2P, 2P + 1 times rows 2R, 2R + 1 of the half tile.
        int32x4_t mm[T / 2][4];
        for (int pair = 0; pair < T / 2; ++pair) {
            const int32_t both[4] = {start[2 * pair], start[2 * pair + 1], start[2 * pair],
                                     start[2 * pair + 1]};
            for (int r = 0; r < 4; ++r) mm[pair][r] = vld1q_s32(both);
        }
        for (int g = 0; g < kGroups; g += 2) {
            const uint8_t* q0 = q + g * 4 * kPanelRows;
            const uint8_t* q1 = q0 + 4 * kPanelRows;
            uint8x16_t rows[4];
            for (int v = 0; v < 2; ++v) {
                const uint32x4_t w0 = vreinterpretq_u32_u8(vld1q_u8(q0 + 16 * v));
                const uint32x4_t w1 = vreinterpretq_u32_u8(vld1q_u8(q1 + 16 * v));
                rows[2 * v] = vreinterpretq_u8_u32(vzip1q_u32(w0, w1));
                rows[2 * v + 1] = vreinterpretq_u8_u32(vzip2q_u32(w0, w1));
            }
            const int32x4_t a0 = vreinterpretq_s32_s8(LoadTokenGroups<T>(act + g * width * 4));
            const int32x4_t a1 =
                vreinterpretq_s32_s8(LoadTokenGroups<T>(act + (g + 1) * width * 4));
            int8x16_t tokens[2] = {vreinterpretq_s8_s32(vzip1q_s32(a0, a1)),
                                   vreinterpretq_s8_s32(vzip2q_s32(a0, a1))};
            for (int pair = 0; pair < T / 2; ++pair) {
                for (int r = 0; r < 4; ++r) MINFER_ARM_USMMLA(mm[pair][r], rows[r], tokens[pair]);
            }
        }
        // Back to a vector of 4 rows per token: the even lanes are token 2P, the odd 2P + 1.
        for (int pair = 0; pair < T / 2; ++pair) {
            for (int v = 0; v < 2; ++v) {
                dot[2 * pair][v] = vuzp1q_s32(mm[pair][2 * v], mm[pair][2 * v + 1]);
                dot[2 * pair + 1][v] = vuzp2q_s32(mm[pair][2 * v], mm[pair][2 * v + 1]);
            }
        }
    } else {
        constexpr ArmDot kLaneDot = kDot == ArmDot::kSdot ? ArmDot::kSdot : ArmDot::kUsdot;
        const uint8x16_t flip = vdupq_n_u8(0x80);
        for (int t = 0; t < T; ++t) dot[t][0] = dot[t][1] = vdupq_n_s32(start[t]);
        for (int g = 0; g < kGroups; ++g) {
            const uint8x16_t wu[2] = {vld1q_u8(q + g * 4 * kPanelRows),
                                      vld1q_u8(q + g * 4 * kPanelRows + 16)};
            const int8x16_t ws[2] = {vreinterpretq_s8_u8(veorq_u8(wu[0], flip)),
                                     vreinterpretq_s8_u8(veorq_u8(wu[1], flip))};
            const int8x16_t tokens = LoadTokenGroups<T>(act + g * width * 4);
            DotTokens<kLaneDot, T>(dot, ws, wu, tokens, std::make_index_sequence<T>());
        }
    }
}

// Rows [8 * half, 8 * half + 8) of the panel (two vectors of 4) times tokens slot0 .. slot0 + T - 1
// of a tile; the panel's block 0 is block block0 of the activations.
template <ArmDot kDot, int T, int kSub, int kSubs, bool kMin>
void HalfTileNeon(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t tile,
                  int slot0, float* y, int64_t y_stride, int n_valid_rows, bool accumulate,
                  int half) {
    const int r0 = 8 * half;
    float32x4_t acc[T][2];
    for (int t = 0; t < T; ++t) {
        for (int v = 0; v < 2; ++v) {
            float lanes[4] = {};
            for (int i = 0; i < 4; ++i) {
                const int r = r0 + 4 * v + i;
                if (accumulate && r < n_valid_rows) lanes[i] = y[t * y_stride + r];
            }
            acc[t][v] = vld1q_f32(lanes);
        }
    }
    const int8_t* act = a.q_tile(tile);
    const int32_t* corr = a.corr + a.sub_tile(tile) + slot0;
    const float* da = a.d + a.block_tile(tile) + slot0;
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        const int64_t ab = block0 + b;  // block of the activation row
        int32x4_t isum[T][2];
        for (int j = 0; j < kSubs; ++j) {
            const int64_t s = b * kSubs + j, as = ab * kSubs + j;
            int32x4_t dot[T][2];
            int32_t start[T];
            for (int t = 0; t < T; ++t) start[t] = kDot == ArmDot::kSdot ? 0 : corr[as * a.width + t];
            SubBlockDots<kDot, T, kSub>(dot, start, p.q + s * kSub * kPanelRows + 4 * r0,
                                        act + (as * kSub / 4 * a.width + slot0) * 4, a.width);
            if constexpr (kSubs == 1) {
                for (int t = 0; t < T; ++t) isum[t][0] = dot[t][0], isum[t][1] = dot[t][1];
            } else {
                const int32_t* scale = p.scale + s * kPanelRows + r0;
                for (int v = 0; v < 2; ++v) {
                    const int32x4_t sc = vld1q_s32(scale + 4 * v);
                    for (int t = 0; t < T; ++t) {
                        isum[t][v] = j == 0 ? vmulq_s32(dot[t][v], sc)
                                            : vmlaq_s32(isum[t][v], dot[t][v], sc);
                    }
                }
            }
        }
        const float* dw = p.d + b * kPanelRows + r0;
        const float* min_scale = p.min_scale + b * kPanelRows + r0;
        for (int v = 0; v < 2; ++v) {
            const float32x4_t dwv = vld1q_f32(dw + 4 * v);
            if constexpr (kSubs == 1) {
                // acc = fma(float(isum), dw * da, acc), then fma(min_scale, s_a, acc)
                for (int t = 0; t < T; ++t) {
                    const float32x4_t scale = vmulq_n_f32(dwv, da[ab * a.width + t]);
                    acc[t][v] = vfmaq_f32(acc[t][v], vcvtq_f32_s32(isum[t][v]), scale);
                }
                if constexpr (kMin) {
                    const float32x4_t offset = vld1q_f32(min_scale + 4 * v);
                    const float* sum = a.sum + a.block_tile(tile) + ab * a.width + slot0;
                    for (int t = 0; t < T; ++t) {
                        acc[t][v] = vfmaq_n_f32(acc[t][v], offset, sum[t]);
                    }
                }
            } else {
                // block = dw * float(isum) [then fma(min_scale, float(msum), block)];
                // acc = fma(da, block, acc)
                for (int t = 0; t < T; ++t) {
                    float32x4_t block = vmulq_f32(dwv, vcvtq_f32_s32(isum[t][v]));
                    if constexpr (kMin) {
                        int32x4_t msum = vdupq_n_s32(0);
                        const int32_t* bsum =
                            a.bsum + a.pair_tile(tile) + ab * (kSubs / 2) * a.width + slot0 + t;
                        for (int j = 0; j < kSubs / 2; ++j) {
                            // two int16 mins per row times the two int16 sums of the token
                            const int32x4_t mins =
                                vld1q_s32(p.mins + (b * (kSubs / 2) + j) * kPanelRows + r0 + 4 * v);
                            const int32_t pair = bsum[j * a.width];
                            const auto lo = static_cast<int16_t>(pair & 0xFFFF);
                            const auto hi = static_cast<int16_t>(pair >> 16);
                            msum = vmlaq_n_s32(msum, vshrq_n_s32(vshlq_n_s32(mins, 16), 16), lo);
                            msum = vmlaq_n_s32(msum, vshrq_n_s32(mins, 16), hi);
                        }
                        block = vfmaq_f32(block, vld1q_f32(min_scale + 4 * v), vcvtq_f32_s32(msum));
                    }
                    acc[t][v] = vfmaq_n_f32(acc[t][v], block, da[ab * a.width + t]);
                }
            }
        }
    }
    for (int t = 0; t < T; ++t) {
        for (int v = 0; v < 2; ++v) {
            float lanes[4];
            vst1q_f32(lanes, acc[t][v]);
            for (int i = 0; i < 4; ++i) {
                const int r = r0 + 4 * v + i;
                if (r < n_valid_rows) y[t * y_stride + r] = lanes[i];
            }
        }
    }
}

template <ArmDot kDot, int kSub, int kSubs, bool kMin>
void IntPanelNeon(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t n_tokens,
                  float* y, int64_t y_stride, int n_valid_rows, bool accumulate) {
    for (int half = 0; half < 2 && 8 * half < n_valid_rows; ++half) {
        ForEachTokenRun(a, n_tokens, [&](auto run, int64_t tile, int slot, int64_t t) HWY_ATTR {
            HalfTileNeon<kDot, decltype(run)::value, kSub, kSubs, kMin>(
                p, a, block0, tile, slot, y + t * y_stride, y_stride, n_valid_rows, accumulate,
                half);
        });
    }
}

template <ArmDot kDot>
void GemmIntPanelNeon(const IntPanel& p, const IntActivations& a, int64_t block0, int64_t n_tokens,
                      float* y, int64_t y_stride, int n_valid_rows, bool accumulate) {
    auto all = [&](auto kernel) {
        kernel(p, a, block0, n_tokens, y, y_stride, n_valid_rows, accumulate);
    };
    if (p.subs_per_block == 1) {
        return p.has_min ? all(IntPanelNeon<kDot, 32, 1, true>)
                         : all(IntPanelNeon<kDot, 32, 1, false>);
    }
    if (p.sub_size == 32) {
        return p.has_min ? all(IntPanelNeon<kDot, 32, 8, true>)
                         : all(IntPanelNeon<kDot, 32, 8, false>);
    }
    return p.has_min ? all(IntPanelNeon<kDot, 16, 16, true>)
                     : all(IntPanelNeon<kDot, 16, 16, false>);
}

#endif  // MINFER_GEMM_ARM_NEON

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
