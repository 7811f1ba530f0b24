// AVX-512 unpacking of whole 16-row panels (see matmul_internal.h) for the commonest types:
// Q4_0, Q5_0, Q8_0, Q4_K and Q6_K, and F32 / F16 / BF16 into float panels (those also on
// AVX2). The panel interleaves the rows by groups of 4 values, so unpacking is a transposition:
// the raw quant bytes of the 16 rows are transposed as 32-bit words first (every group of 4
// values is one word in the block), then decoded in place, 16 rows at a time, since the decoding
// (nibble masks, shifts, bias) treats every byte alike. The scalar unpacking (gemm_panels.cpp)
// spent about a twelfth of the GEMM's time; this does the same work in a few instructions per
// block and row. Other targets, types and the last, partial panel of a matrix report "not
// handled" and take the scalar path.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/kernel_path.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_simd.h"
#include "quant/block_types.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_fill_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format off: the per-target header must follow highway.h
#include "kernels/gemm_x86_avx3-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3

// The 16 rows of a panel: row r of block b starts at base + r * row_bytes + b * block_bytes.
struct PanelRows {
    const uint8_t* base;
    int64_t row_bytes;
    int64_t block_bytes;
    // What the next panel or chunk will read is prefetch_delta bytes further (0: nothing to
    // prefetch).
    int64_t prefetch_delta = 0;
    const uint8_t* at(int r, int64_t b, std::size_t offset) const {
        return base + r * row_bytes + b * block_bytes + offset;
    }
};

// The 16 rows of a panel come from 16 places in memory (16 x 504 bytes in a row of 896 Q4_0
// values): too short a stream for the hardware prefetcher, so the unpacking stalled on every line
// (70 % of a one-token product). So while block b of this panel or chunk is unpacked, the same
// bytes of the next one are prefetched: one panel or chunk ahead (8-13 KiB), about as far as
// the GEMV's prefetch reaches. Blocks of kBlockBytes < 64 take one prefetch per row every
// 64 / kBlockBytes blocks, which still touches every line.
template <int kBlockBytes>
HWY_INLINE void PrefetchNext(const PanelRows& rows, int64_t b) {
    constexpr int kEvery = kBlockBytes < 64 ? 64 / kBlockBytes : 1;
    if (rows.prefetch_delta == 0 || b % kEvery != 0) return;
    const uint8_t* next = rows.at(0, b, 0) + rows.prefetch_delta;
#pragma GCC unroll 16
    for (int r = 0; r < kPanelRows; ++r) {
#pragma GCC unroll 4
        for (int line = 0; line < kBlockBytes; line += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(next + r * rows.row_bytes + line),
                         _MM_HINT_T0);
        }
    }
}

// f16 in the low (high = false) or high half of each word, as f32.
HWY_INLINE __m512 HalvesToFloat(__m512i words, bool high) {
    if (high) words = _mm512_srli_epi32(words, 16);
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
}

// out[j] = word j of 16 bytes at `offset` in block b of the 16 rows (row r in lane r).
HWY_INLINE void Transpose16x4(const PanelRows& rows, int64_t b, std::size_t offset,
                              __m512i (&out)[4]) {
    __m512i z[4];  // z[k]: rows k, k + 4, k + 8, k + 12 in its 128-bit lanes
    auto load = [&](int r) {
        return _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows.at(r, b, offset)));
    };
    for (int k = 0; k < 4; ++k) {
        z[k] = _mm512_castsi128_si512(load(k));
        z[k] = _mm512_inserti32x4(z[k], load(k + 4), 1);
        z[k] = _mm512_inserti32x4(z[k], load(k + 8), 2);
        z[k] = _mm512_inserti32x4(z[k], load(k + 12), 3);
    }
    // Per 128-bit lane L (rows 4L .. 4L + 3): a 4 x 4 transposition of words.
    const __m512i lo01 = _mm512_unpacklo_epi32(z[0], z[1]),
                  hi01 = _mm512_unpackhi_epi32(z[0], z[1]);
    const __m512i lo23 = _mm512_unpacklo_epi32(z[2], z[3]),
                  hi23 = _mm512_unpackhi_epi32(z[2], z[3]);
    out[0] = _mm512_unpacklo_epi64(lo01, lo23);
    out[1] = _mm512_unpackhi_epi64(lo01, lo23);
    out[2] = _mm512_unpacklo_epi64(hi01, hi23);
    out[3] = _mm512_unpackhi_epi64(hi01, hi23);
}

// 32-bit word at `offset` in block b of each of the 16 rows. Not vpgatherdd: on Zen 4 one
// gather per 32-value block took a third of a one-token product; the 4 x 4 transposition of
// Transpose16x4 (the compiler drops the words not used) costs a few cycles.
HWY_INLINE __m512i GatherWords(const PanelRows& rows, int64_t b, std::size_t offset) {
    __m512i words[4];
    Transpose16x4(rows, b, offset, words);
    return words[0];
}

// out[j] = word j of 32 bytes at `offset` in block b of the 16 rows.
HWY_INLINE void Transpose16x8(const PanelRows& rows, int64_t b, std::size_t offset,
                              __m512i (&out)[8]) {
    // z[k] holds two rows (8 words each): rows k and k + 4 for k < 4, k + 4 and k + 8 after.
    __m512i z[8];
    for (int k = 0; k < 8; ++k) {
        const int r0 = k < 4 ? k : k + 4;
        const auto* p0 = reinterpret_cast<const __m256i*>(rows.at(r0, b, offset));
        const auto* p1 = reinterpret_cast<const __m256i*>(rows.at(r0 + 4, b, offset));
        z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(p0)),
                                  _mm256_loadu_si256(p1), 1);
    }
    // Per 128-bit lane, 4 x 4 transpositions: t[4h + j] holds word j (lanes 0, 2) and word j + 4
    // (lanes 1, 3) of rows 8h .. 8h + 3 (lanes 0, 1) and 8h + 4 .. 8h + 7 (lanes 2, 3).
    __m512i t[8];
    for (int h = 0; h < 2; ++h) {
        const __m512i* zh = z + 4 * h;
        const __m512i lo01 = _mm512_unpacklo_epi32(zh[0], zh[1]);
        const __m512i hi01 = _mm512_unpackhi_epi32(zh[0], zh[1]);
        const __m512i lo23 = _mm512_unpacklo_epi32(zh[2], zh[3]);
        const __m512i hi23 = _mm512_unpackhi_epi32(zh[2], zh[3]);
        t[4 * h + 0] = _mm512_unpacklo_epi64(lo01, lo23);
        t[4 * h + 1] = _mm512_unpackhi_epi64(lo01, lo23);
        t[4 * h + 2] = _mm512_unpacklo_epi64(hi01, hi23);
        t[4 * h + 3] = _mm512_unpackhi_epi64(hi01, hi23);
    }
    for (int j = 0; j < 4; ++j) {
        out[j] = _mm512_shuffle_i32x4(t[j], t[4 + j], 0x88);      // lanes 0, 2 of each
        out[j + 4] = _mm512_shuffle_i32x4(t[j], t[4 + j], 0xDD);  // lanes 1, 3 of each
    }
}

// Stores the 16 rows' group of 4 values at column `col` (value + 128 already).
HWY_INLINE void StoreGroup(const IntPanel& p, int64_t col, __m512i v) {
    _mm512_store_si512(p.q + (col / 4) * kPanelRows * 4, v);
}

HWY_INLINE __m512i LowNibbles(__m512i v) {
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0F));
}
HWY_INLINE __m512i HighNibbles(__m512i v) {
    return _mm512_and_si512(_mm512_srli_epi32(v, 4), _mm512_set1_epi8(0x0F));
}

// ---- decoding: block b of the 16 rows as codes, one vector per group of 4 columns ----
// The codes are unsigned (what vpdpbusd multiplies): value + kOffset of the type. The panels store
// them + (128 - kOffset), the one-token kernels multiply them as they are and correct the sums by
// kOffset * sum(a).

// Q4_0: word j of qs holds columns 4j .. 4j + 3 (low nibbles) and 16 + 4j .. (high nibbles).
// Codes value + 8; d as f32.
HWY_INLINE void DecodeQ4_0(const PanelRows& rows, int64_t b, __m512i (&v)[8], __m512& d) {
    __m512i w[4];
    Transpose16x4(rows, b, offsetof(block_q4_0, qs), w);
    for (int j = 0; j < 4; ++j) {
        v[j] = LowNibbles(w[j]);
        v[4 + j] = HighNibbles(w[j]);
    }
    d = HalvesToFloat(GatherWords(rows, b, offsetof(block_q4_0, d)), false);
}

// Q5_0: as Q4_0 plus the fifth bit of column c in bit c of qh, which `spread` (FifthBitSpread)
// turns from 4 bits into bit 4 of 4 bytes. Codes value + 16.
HWY_INLINE __m512i FifthBitSpread() {
    alignas(64) uint32_t table[16];  // word i: bit k of i -> 0x10 in byte k
    for (uint32_t i = 0; i < 16; ++i) {
        table[i] = 0;
        for (int k = 0; k < 4; ++k) table[i] |= ((i >> k) & 1u) << (8 * k + 4);
    }
    return _mm512_load_si512(table);
}
HWY_INLINE void DecodeQ5_0(const PanelRows& rows, int64_t b, __m512i spread, __m512i (&v)[8],
                           __m512& d) {
    __m512i w[4];
    Transpose16x4(rows, b, offsetof(block_q5_0, qs), w);
    // d (bytes 0-1) and qh (bytes 2-5) of the 16 rows from one transposition.
    static_assert(offsetof(block_q5_0, d) == 0 && offsetof(block_q5_0, qh) == 2);
    __m512i head[4];
    Transpose16x4(rows, b, 0, head);
    const __m512i qh =
        _mm512_or_si512(_mm512_srli_epi32(head[0], 16), _mm512_slli_epi32(head[1], 16));
    for (int j = 0; j < 4; ++j) {
        // vpermd reads the low 4 bits of each index word.
        const __m512i fifth_low = _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * j), spread);
        const __m512i fifth_high =
            _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 16 + 4 * j), spread);
        v[j] = _mm512_or_si512(LowNibbles(w[j]), fifth_low);
        v[4 + j] = _mm512_or_si512(HighNibbles(w[j]), fifth_high);
    }
    d = HalvesToFloat(head[0], false);
}

// Q8_0: codes value + 128.
HWY_INLINE void DecodeQ8_0(const PanelRows& rows, int64_t b, __m512i (&v)[8], __m512& d) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    Transpose16x8(rows, b, offsetof(block_q8_0, qs), v);
    for (int j = 0; j < 8; ++j) v[j] = _mm512_xor_si512(v[j], flip);
    d = HalvesToFloat(GatherWords(rows, b, offsetof(block_q8_0, d)), false);
}

// Byte k of each word, as a 32-bit value.
HWY_INLINE __m512i Byte(__m512i words, int k) {
    return _mm512_and_si512(_mm512_srli_epi32(words, 8 * k), _mm512_set1_epi32(0xFF));
}

// Q4_K's block header: d, -dmin, the 8 integer sub-block scales and the mins in pairs (low half:
// the even sub-block), unpacked for the 16 rows at once (see k_scales.h).
struct Q4KHead {
    __m512 d, neg_dmin;
    __m512i scale[8], mins[4];
};
HWY_INLINE Q4KHead DecodeQ4_KHead(const PanelRows& rows, int64_t b) {
    // d, dmin, then the 12 bytes of scales: the first 16 bytes of the block.
    static_assert(offsetof(block_q4_K, d) == 0 && offsetof(block_q4_K, scales) == 4);
    __m512i head[4];
    Transpose16x4(rows, b, 0, head);
    Q4KHead h;
    h.d = HalvesToFloat(head[0], false);
    h.neg_dmin = _mm512_sub_ps(_mm512_setzero_ps(), HalvesToFloat(head[0], true));
    const __m512i s0 = head[1], s1 = head[2], s2 = head[3];
    const __m512i six = _mm512_set1_epi32(63), four = _mm512_set1_epi32(15);
    __m512i min[8];
    for (int j = 0; j < 4; ++j) {
        h.scale[j] = _mm512_and_si512(Byte(s0, j), six);
        min[j] = _mm512_and_si512(Byte(s1, j), six);
        h.scale[j + 4] = _mm512_or_si512(_mm512_and_si512(Byte(s2, j), four),
                                         _mm512_slli_epi32(_mm512_srli_epi32(Byte(s0, j), 6), 4));
        min[j + 4] = _mm512_or_si512(_mm512_srli_epi32(Byte(s2, j), 4),
                                     _mm512_slli_epi32(_mm512_srli_epi32(Byte(s1, j), 6), 4));
    }
    for (int j = 0; j < 4; ++j) {
        h.mins[j] = _mm512_or_si512(min[2 * j], _mm512_slli_epi32(min[2 * j + 1], 16));
    }
    return h;
}

// Q4_K: bytes 32 * pair .. + 31 of qs hold sub-block 2 * pair (low nibbles, into even) and
// 2 * pair + 1 (high, into odd). Codes = values (0-15).
HWY_INLINE void DecodeQ4_KPair(const PanelRows& rows, int64_t b, int pair, __m512i (&even)[8],
                               __m512i (&odd)[8]) {
    __m512i w[8];
    Transpose16x8(rows, b, offsetof(block_q4_K, qs) + 32 * pair, w);
    for (int j = 0; j < 8; ++j) {
        even[j] = LowNibbles(w[j]);
        odd[j] = HighNibbles(w[j]);
    }
}

// Q6_K's block header: d and the 16 int8 sub-block scales.
struct Q6KHead {
    __m512 d;
    __m512i scale[16];
};
HWY_INLINE Q6KHead DecodeQ6_KHead(const PanelRows& rows, int64_t b) {
    Q6KHead h;
    // d is the last field: the last word of the 16 bytes that end with it.
    __m512i tail[4];
    Transpose16x4(rows, b, offsetof(block_q6_K, d) + 2 - 16, tail);
    h.d = HalvesToFloat(tail[3], true);
    __m512i words[4];
    Transpose16x4(rows, b, offsetof(block_q6_K, scales), words);
    for (int k = 0; k < 4; ++k) {  // 4 scales per word
        for (int i = 0; i < 4; ++i) {
            h.scale[4 * k + i] = _mm512_srai_epi32(_mm512_slli_epi32(words[k], 24 - 8 * i), 24);
        }
    }
    return h;
}

// Q6_K: in each half of 128 values, columns l, l + 32, l + 64, l + 96 (l < 32) take the low
// nibble of ql[l], of ql[l + 32], the high nibble of ql[l], of ql[l + 32], with bits 0-1, 2-3,
// 4-5, 6-7 of qh[l] on top. Calls group(column in the block, codes = value + 32) for the 32
// groups of the half, four at a time: columns 4j, 32 + 4j, 64 + 4j, 96 + 4j of the half.
template <class Group>
HWY_INLINE void DecodeQ6_KHalf(const PanelRows& rows, int64_t b, int half, Group group) {
    const __m512i low2 = _mm512_set1_epi8(3);
    auto high_bits = [&](__m512i h, int shift) {  // bits shift, shift + 1 of each byte, at 4-5
        return _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, shift), low2), 4);
    };
    __m512i a[8], c[8], h[8];
    Transpose16x8(rows, b, offsetof(block_q6_K, ql) + 64 * half, a);
    Transpose16x8(rows, b, offsetof(block_q6_K, ql) + 64 * half + 32, c);
    Transpose16x8(rows, b, offsetof(block_q6_K, qh) + 32 * half, h);
    const int col = 128 * half;
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
        group(col + 4 * j, _mm512_or_si512(LowNibbles(a[j]), high_bits(h[j], 0)));
        group(col + 32 + 4 * j, _mm512_or_si512(LowNibbles(c[j]), high_bits(h[j], 2)));
        group(col + 64 + 4 * j, _mm512_or_si512(HighNibbles(a[j]), high_bits(h[j], 4)));
        group(col + 96 + 4 * j, _mm512_or_si512(HighNibbles(c[j]), high_bits(h[j], 6)));
    }
}

// ---- whole panels ----

// 32-value blocks: the codes + (128 - kOffset) and d.
template <int kOffset, class Decode>
HWY_INLINE void FillBlock32(const PanelRows& rows, const IntPanel& p, Decode decode) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(128 - kOffset));
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        __m512i v[8];
        __m512 d;
        decode(b, v, d);
        for (int g = 0; g < 8; ++g) {
            StoreGroup(p, b * 32 + 4 * g, kOffset == 128 ? v[g] : _mm512_add_epi8(v[g], bias));
        }
        _mm512_store_ps(p.d + b * kPanelRows, d);
    }
}

// The panel stores (char-typed) would make the compiler reload every field of rows and panel
// after each store, so the Fill functions work on local copies.
void FillQ4_0(const PanelRows& rows_in, const IntPanel& panel) {
    const PanelRows rows = rows_in;
    FillBlock32<8>(rows, IntPanel(panel), [&](int64_t b, __m512i(&v)[8], __m512& d) {
        PrefetchNext<sizeof(block_q4_0)>(rows, b);
        DecodeQ4_0(rows, b, v, d);
    });
}

void FillQ5_0(const PanelRows& rows_in, const IntPanel& panel) {
    const PanelRows rows = rows_in;
    const __m512i spread = FifthBitSpread();
    FillBlock32<16>(rows, IntPanel(panel), [&](int64_t b, __m512i(&v)[8], __m512& d) {
        PrefetchNext<sizeof(block_q5_0)>(rows, b);
        DecodeQ5_0(rows, b, spread, v, d);
    });
}

void FillQ8_0(const PanelRows& rows_in, const IntPanel& panel) {
    const PanelRows rows = rows_in;
    FillBlock32<128>(rows, IntPanel(panel), [&](int64_t b, __m512i(&v)[8], __m512& d) {
        PrefetchNext<sizeof(block_q8_0)>(rows, b);
        DecodeQ8_0(rows, b, v, d);
    });
}

void FillQ4_K(const PanelRows& rows_in, const IntPanel& panel) {
    const PanelRows rows = rows_in;
    const IntPanel p = panel;
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(128));
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        PrefetchNext<sizeof(block_q4_K)>(rows, b);
        for (int pair = 0; pair < 4; ++pair) {
            __m512i even[8], odd[8];
            DecodeQ4_KPair(rows, b, pair, even, odd);
            for (int j = 0; j < 8; ++j) {
                StoreGroup(p, b * QK_K + 64 * pair + 4 * j, _mm512_add_epi8(even[j], bias));
                StoreGroup(p, b * QK_K + 64 * pair + 32 + 4 * j, _mm512_add_epi8(odd[j], bias));
            }
        }
        const Q4KHead h = DecodeQ4_KHead(rows, b);
        _mm512_store_ps(p.d + b * kPanelRows, h.d);
        _mm512_store_ps(p.min_scale + b * kPanelRows, h.neg_dmin);
        for (int j = 0; j < 8; ++j) _mm512_store_si512(p.scale + (b * 8 + j) * kPanelRows, h.scale[j]);
        for (int j = 0; j < 4; ++j) _mm512_store_si512(p.mins + (b * 4 + j) * kPanelRows, h.mins[j]);
    }
}

void FillQ6_K(const PanelRows& rows_in, const IntPanel& panel) {
    const PanelRows rows = rows_in;
    const IntPanel p = panel;
    const __m512i bias = _mm512_set1_epi8(128 - 32);
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        PrefetchNext<sizeof(block_q6_K)>(rows, b);
        for (int half = 0; half < 2; ++half) {
            DecodeQ6_KHalf(rows, b, half, [&](int col, __m512i codes) {
                StoreGroup(p, b * QK_K + col, _mm512_add_epi8(codes, bias));
            });
        }
        const Q6KHead h = DecodeQ6_KHead(rows, b);
        _mm512_store_ps(p.d + b * kPanelRows, h.d);
        for (int s = 0; s < 16; ++s) _mm512_store_si512(p.scale + (b * 16 + s) * kPanelRows, h.scale[s]);
    }
}

// ---- one token, unpacked in registers ----
// One token multiplies each unpacked value once, so storing a panel and loading it back cost as
// much as the products themselves. These kernels decode block after block into registers and
// multiply at once. Per row they perform the float operations of the panel kernels
// (gemm_x86_avx3-inl.h's Block32Blocks and SuperBlockBlocks for one token), in the same order,
// on the same integer sums (exact, however computed), so they give the same bits.

template <bool kVnni>
HWY_INLINE __m512i DotGroup(__m512i acc, __m512i codes, const int8_t* four) {
    return kVnni ? DpbusdVnni(acc, codes, four) : DpbusdEmulated(acc, codes, four);
}

// 32-value blocks: codes value + kOffset, so each dot starts at -kOffset * sum(a) = corr * kOffset
// / 128 (corr = -128 * sum(a), exact). Per row: acc = fma(float(dot), d * d_a, acc).
template <int kOffset, bool kVnni, class Decode>
HWY_INLINE __m512 OneTokenBlock32(const IntActivations& a, int64_t block0, int64_t n_blocks,
                                  __m512 acc, Decode decode) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        const int64_t ab = block0 + b;
        __m512i v[8];
        __m512 dw;
        decode(b, v, dw);
        const int8_t* act = a.q + ab * 32;
        // Two chains of vpdpbusd, so that the block's latency does not set the pace.
        __m512i dot[2] = {_mm512_set1_epi32(OffsetCorrection(a.corr[ab], kOffset)),
                          _mm512_setzero_si512()};
        for (int g = 0; g < 8; ++g) dot[g % 2] = DotGroup<kVnni>(dot[g % 2], v[g], act + 4 * g);
        const __m512 sd = _mm512_mul_ps(dw, _mm512_set1_ps(a.d[ab]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(dot[0], dot[1])), sd, acc);
    }
    return acc;
}

// Q4_K: per row, acc = fma(d_a, fma(float(msum), -dmin, float(isum) * d), acc), with isum the
// sum of the sub-block dots times their scales and msum that of the mins times the sub-block
// sums of the activations.
template <bool kVnni>
HWY_INLINE __m512 OneTokenQ4_K(const PanelRows& rows, const IntActivations& a, int64_t block0,
                               int64_t n_blocks, __m512 acc) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        PrefetchNext<sizeof(block_q4_K)>(rows, b);
        const int64_t ab = block0 + b;
        const Q4KHead h = DecodeQ4_KHead(rows, b);
        __m512i isum = _mm512_setzero_si512();
        for (int pair = 0; pair < 4; ++pair) {
            __m512i even[8], odd[8];
            DecodeQ4_KPair(rows, b, pair, even, odd);
            const int8_t* act = a.q + ab * QK_K + 64 * pair;
            __m512i de[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            __m512i dodd[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
            for (int j = 0; j < 8; ++j) {
                de[j % 2] = DotGroup<kVnni>(de[j % 2], even[j], act + 4 * j);
                dodd[j % 2] = DotGroup<kVnni>(dodd[j % 2], odd[j], act + 32 + 4 * j);
            }
            isum = _mm512_add_epi32(
                isum, _mm512_mullo_epi32(_mm512_add_epi32(de[0], de[1]), h.scale[2 * pair]));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(_mm512_add_epi32(dodd[0], dodd[1]),
                                                             h.scale[2 * pair + 1]));
        }
        __m512i msum = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) msum = Dpwssd<kVnni>(msum, h.mins[j], a.bsum + ab * 4 + j);
        const __m512 block = _mm512_fmadd_ps(_mm512_cvtepi32_ps(msum), h.neg_dmin,
                                             _mm512_mul_ps(_mm512_cvtepi32_ps(isum), h.d));
        acc = _mm512_fmadd_ps(block, _mm512_set1_ps(a.d[ab]), acc);
    }
    return acc;
}

// Q6_K: codes value + 32, so each sub-block's dot starts at corr / 4; per row,
// acc = fma(float(isum), d * d_a, acc).
template <bool kVnni>
HWY_INLINE __m512 OneTokenQ6_K(const PanelRows& rows, const IntActivations& a, int64_t block0,
                               int64_t n_blocks, __m512 acc) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        PrefetchNext<sizeof(block_q6_K)>(rows, b);
        const int64_t ab = block0 + b;
        const Q6KHead h = DecodeQ6_KHead(rows, b);
        const int8_t* act = a.q + ab * QK_K;
        __m512i isum = _mm512_setzero_si512();
        for (int half = 0; half < 2; ++half) {
            __m512i dot[8];  // sub-blocks 8 * half + k
            for (int k = 0; k < 8; ++k) {
                dot[k] = _mm512_set1_epi32(a.corr[ab * 16 + 8 * half + k] / 4);
            }
            DecodeQ6_KHalf(rows, b, half, [&](int col, __m512i codes) {
                const int k = (col - 128 * half) / 16;
                dot[k] = DotGroup<kVnni>(dot[k], codes, act + col);
            });
            for (int k = 0; k < 8; ++k) {
                isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot[k], h.scale[8 * half + k]));
            }
        }
        const __m512 sd = _mm512_mul_ps(h.d, _mm512_set1_ps(a.d[ab]));
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), sd, acc);
    }
    return acc;
}

template <bool kVnni>
__m512 OneToken(GgmlType type, const PanelRows& rows, const IntActivations& a, int64_t block0,
                int64_t n_blocks, __m512 acc) {
    switch (type) {
        case GgmlType::Q4_0:
            return OneTokenBlock32<8, kVnni>(a, block0, n_blocks, acc,
                                             [&](int64_t b, __m512i(&v)[8], __m512& d) {
                                                 PrefetchNext<sizeof(block_q4_0)>(rows, b);
                                                 DecodeQ4_0(rows, b, v, d);
                                             });
        case GgmlType::Q5_0: {
            const __m512i spread = FifthBitSpread();
            return OneTokenBlock32<16, kVnni>(a, block0, n_blocks, acc,
                                              [&](int64_t b, __m512i(&v)[8], __m512& d) {
                                                  PrefetchNext<sizeof(block_q5_0)>(rows, b);
                                                  DecodeQ5_0(rows, b, spread, v, d);
                                              });
        }
        case GgmlType::Q8_0:
            return OneTokenBlock32<128, kVnni>(a, block0, n_blocks, acc,
                                               [&](int64_t b, __m512i(&v)[8], __m512& d) {
                                                   PrefetchNext<sizeof(block_q8_0)>(rows, b);
                                                   DecodeQ8_0(rows, b, v, d);
                                               });
        case GgmlType::Q4_K:
            return OneTokenQ4_K<kVnni>(rows, a, block0, n_blocks, acc);
        default:  // Q6_K
            return OneTokenQ6_K<kVnni>(rows, a, block0, n_blocks, acc);
    }
}

bool GemvPanel(const WeightMatrix& w, int64_t row_begin, int64_t block_begin, int64_t n_blocks,
               const IntActivations& a, float* y, bool accumulate, int64_t prefetch_delta) {
    // Whole panels, one token in dense activations (tiles of 1).
    if (row_begin + kPanelRows > w.n_rows || a.width != 1) return false;
    switch (w.type) {
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::Q8_0:
        case GgmlType::Q4_K:
        case GgmlType::Q6_K:
            break;
        default:
            return false;
    }
    const auto row_bytes = static_cast<int64_t>(row_size(w.type, w.n_cols));
    PanelRows rows;
    rows.block_bytes = static_cast<int64_t>(type_size(w.type));
    rows.base = reinterpret_cast<const uint8_t*>(w.data.data()) + row_begin * row_bytes +
                block_begin * rows.block_bytes;
    rows.row_bytes = row_bytes;
    rows.prefetch_delta = prefetch_delta;
    __m512 acc = accumulate ? _mm512_loadu_ps(y) : _mm512_setzero_ps();
    acc = x86_vnni_available() ? OneToken<true>(w.type, rows, a, block_begin, n_blocks, acc)
                               : OneToken<false>(w.type, rows, a, block_begin, n_blocks, acc);
    _mm512_storeu_ps(y, acc);
    return true;
}

bool FillIntPanel(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                  const IntPanel& panel, int64_t prefetch_delta) {
    const auto row_bytes = static_cast<int64_t>(row_size(w.type, w.n_cols));
    // Whole panels only.
    if (row_begin + kPanelRows > w.n_rows) return false;
    void (*fill)(const PanelRows&, const IntPanel&) = nullptr;
    switch (w.type) {
        case GgmlType::Q4_0:
            fill = FillQ4_0;
            break;
        case GgmlType::Q5_0:
            fill = FillQ5_0;
            break;
        case GgmlType::Q8_0:
            fill = FillQ8_0;
            break;
        case GgmlType::Q4_K:
            fill = FillQ4_K;
            break;
        case GgmlType::Q6_K:
            fill = FillQ6_K;
            break;
        default:
            return false;
    }
    PanelRows rows;
    rows.block_bytes = static_cast<int64_t>(type_size(w.type));
    rows.base = reinterpret_cast<const uint8_t*>(w.data.data()) + row_begin * row_bytes +
                block_begin * rows.block_bytes;
    rows.row_bytes = row_bytes;
    rows.prefetch_delta = prefetch_delta;
    fill(rows, panel);
    return true;
}

// ---- float panels ----

// v[r] = 16 values of row r -> v[k] = value k of the 16 rows: 4 x 4 transpositions of f32 within
// 128-bit lanes (two rounds of unpacks), then two rounds of 128-bit lane shuffles.
HWY_INLINE void Transpose16x16(__m512 (&v)[16]) {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    __m512 u[16];  // u[4i + j]: in 128-bit lane L, value 4L + j of rows 4i .. 4i + 3
    for (int i = 0; i < 4; ++i) {
        auto pd = [](__m512 x) { return _mm512_castps_pd(x); };
        auto ps = [](__m512d x) { return _mm512_castpd_ps(x); };
        u[4 * i + 0] = ps(_mm512_unpacklo_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
        u[4 * i + 1] = ps(_mm512_unpackhi_pd(pd(t[4 * i]), pd(t[4 * i + 2])));
        u[4 * i + 2] = ps(_mm512_unpacklo_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
        u[4 * i + 3] = ps(_mm512_unpackhi_pd(pd(t[4 * i + 1]), pd(t[4 * i + 3])));
    }
    for (int j = 0; j < 4; ++j) {
        // lanes (0, 2) and (1, 3) of rows 0-7, then of rows 8-15
        const __m512 even_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88);
        const __m512 odd_lo = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
        const __m512 even_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88);
        const __m512 odd_hi = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
        v[j] = _mm512_shuffle_f32x4(even_lo, even_hi, 0x88);       // lane 0
        v[8 + j] = _mm512_shuffle_f32x4(even_lo, even_hi, 0xDD);   // lane 2
        v[4 + j] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0x88);     // lane 1
        v[12 + j] = _mm512_shuffle_f32x4(odd_lo, odd_hi, 0xDD);    // lane 3
    }
}

// `count` (<= 16) values of a row from `p` as f32 (the rest 0).
template <GgmlType kType>
HWY_INLINE __m512 LoadRow16(const uint8_t* p, int count) {
    if constexpr (kType == GgmlType::F32) {
        return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), p);
    } else {
        const __m256i h = _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << count) - 1u), p);
        if constexpr (kType == GgmlType::F16) return _mm512_cvtph_ps(h);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}

// The float fill's step (FillFloat): `count` (<= kFloatColumns) columns of the 16 rows at base
// (row r at base + r * row_bytes) into the panel's first `count` columns.
constexpr int kFloatColumns = 16;
template <GgmlType kType>
HWY_INLINE void FillFloatColumns(const uint8_t* base, int64_t row_bytes, int count, float* panel) {
    __m512 v[16];
    for (int r = 0; r < kPanelRows; ++r) v[r] = LoadRow16<kType>(base + r * row_bytes, count);
    Transpose16x16(v);
    for (int k = 0; k < count; ++k) _mm512_store_ps(panel + k * kPanelRows, v[k]);
}

#elif HWY_TARGET == HWY_AVX2

// Float panels on AVX2, 8 rows and 8 columns at a time. The scalar fill stored one float at a
// time: on a Zen 4 without AVX-512 a one-token matmul of the MoE router (16 x 1024 f32, in the
// batch-invariant mode's panels) took 19-23 us a layer, 5.5-7.9 in the GEMV mode.

// v[r] = row r's 8 values -> v[k] = column k's 8 values (row r in lane r).
HWY_INLINE void Transpose8x8(__m256 (&v)[8]) {
    __m256 pairs[8], quads[8];
    for (int i = 0; i < 4; ++i) {
        // rows 2i, 2i + 1 interleaved: columns 0, 1 | 4, 5 and 2, 3 | 6, 7
        pairs[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        pairs[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
        // rows 4i .. 4i + 3 of columns k | k + 4, k = 0 .. 3
        quads[4 * i] = _mm256_shuffle_ps(pairs[4 * i], pairs[4 * i + 2], 0x44);
        quads[4 * i + 1] = _mm256_shuffle_ps(pairs[4 * i], pairs[4 * i + 2], 0xEE);
        quads[4 * i + 2] = _mm256_shuffle_ps(pairs[4 * i + 1], pairs[4 * i + 3], 0x44);
        quads[4 * i + 3] = _mm256_shuffle_ps(pairs[4 * i + 1], pairs[4 * i + 3], 0xEE);
    }
    for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_permute2f128_ps(quads[k], quads[4 + k], 0x20);
        v[4 + k] = _mm256_permute2f128_ps(quads[k], quads[4 + k], 0x31);
    }
}

// `count` (<= 8) values of a row from `p` as f32 (the rest 0).
template <GgmlType kType>
HWY_INLINE __m256 LoadRow8(const uint8_t* p, int count) {
    if (count < 8) {  // a row's last columns: through a zeroed copy, never past the row
        constexpr int kElem = kType == GgmlType::F32 ? 4 : 2;
        alignas(32) uint8_t tail[32] = {};
        std::memcpy(tail, p, static_cast<std::size_t>(count * kElem));
        return LoadRow8<kType>(tail, 8);
    }
    if constexpr (kType == GgmlType::F32) {
        return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    } else {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        if constexpr (kType == GgmlType::F16) return _mm256_cvtph_ps(h);
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
}

// As the AVX-512 FillFloatColumns, 8 columns and half the rows at a time.
constexpr int kFloatColumns = 8;
template <GgmlType kType>
HWY_INLINE void FillFloatColumns(const uint8_t* base, int64_t row_bytes, int count, float* panel) {
    for (int half = 0; half < 2; ++half) {
        __m256 v[8];
        for (int r = 0; r < 8; ++r) v[r] = LoadRow8<kType>(base + (8 * half + r) * row_bytes, count);
        Transpose8x8(v);
        for (int k = 0; k < count; ++k) _mm256_store_ps(panel + k * kPanelRows + 8 * half, v[k]);
    }
}

#endif  // HWY_TARGET == HWY_AVX3, HWY_AVX2

#if HWY_TARGET != HWY_AVX3

bool FillIntPanel(const WeightMatrix&, int64_t, int64_t, const IntPanel&, int64_t) {
    return false;
}
bool GemvPanel(const WeightMatrix&, int64_t, int64_t, int64_t, const IntActivations&, float*, bool,
               int64_t) {
    return false;
}

#endif  // HWY_TARGET != HWY_AVX3

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2

// Columns [0, n_cols) of the 16 rows at base (row r at base + r * row_bytes), kFloatColumns at a
// time; asks for what the next panel or chunk reads, prefetch_delta bytes further, once per
// 64-byte line of each row, as the integer panels do.
template <GgmlType kType>
void FillFloat(const uint8_t* base, int64_t row_bytes, int64_t n_cols, float* panel,
               int64_t prefetch_delta) {
    constexpr int64_t kElem = kType == GgmlType::F32 ? 4 : 2;
    for (int64_t k0 = 0; k0 < n_cols; k0 += kFloatColumns) {
        if (prefetch_delta != 0 && (k0 * kElem) % 64 == 0) {
            for (int r = 0; r < kPanelRows; ++r) {
                _mm_prefetch(reinterpret_cast<const char*>(base + r * row_bytes + k0 * kElem +
                                                           prefetch_delta),
                             _MM_HINT_T0);
            }
        }
        const int count = static_cast<int>(std::min<int64_t>(n_cols - k0, kFloatColumns));
        FillFloatColumns<kType>(base + k0 * kElem, row_bytes, count, panel + k0 * kPanelRows);
    }
}

bool FillFloatPanel(const WeightMatrix& w, int64_t row_begin, int64_t col_begin, int64_t n_cols,
                    float* panel, int64_t prefetch_delta) {
    if (row_begin + kPanelRows > w.n_rows) return false;
    const auto row_bytes = static_cast<int64_t>(row_size(w.type, w.n_cols));
    const uint8_t* base = reinterpret_cast<const uint8_t*>(w.data.data()) +
                          row_begin * row_bytes + static_cast<int64_t>(row_size(w.type, col_begin));
    switch (w.type) {
        case GgmlType::F32:
            FillFloat<GgmlType::F32>(base, row_bytes, n_cols, panel, prefetch_delta);
            return true;
        case GgmlType::F16:
            FillFloat<GgmlType::F16>(base, row_bytes, n_cols, panel, prefetch_delta);
            return true;
        case GgmlType::BF16:
            FillFloat<GgmlType::BF16>(base, row_bytes, n_cols, panel, prefetch_delta);
            return true;
        default:
            return false;
    }
}

#else

bool FillFloatPanel(const WeightMatrix&, int64_t, int64_t, int64_t, float*, int64_t) {
    return false;
}

#endif  // HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(FillIntPanel);
HWY_EXPORT(FillFloatPanel);
HWY_EXPORT(GemvPanel);

bool gemv_panel_simd(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                     int64_t n_blocks, const IntActivations& act, float* y, bool accumulate,
                     int64_t prefetch_delta) {
    return HWY_DYNAMIC_DISPATCH(GemvPanel)(w, row_begin, block_begin, n_blocks, act, y, accumulate,
                                           prefetch_delta);
}

bool fill_int_panel_simd(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                         const IntPanel& panel, int64_t prefetch_delta) {
    return HWY_DYNAMIC_DISPATCH(FillIntPanel)(w, row_begin, block_begin, panel, prefetch_delta);
}

bool fill_float_panel_simd(const WeightMatrix& w, int64_t row_begin, int64_t col_begin,
                           int64_t n_cols, float* panel, int64_t prefetch_delta) {
    return HWY_DYNAMIC_DISPATCH(FillFloatPanel)(w, row_begin, col_begin, n_cols, panel,
                                                prefetch_delta);
}

}  // namespace minfer::kernels
#endif
