// AVX-512 unpacking of whole 16-row panels (see matmul_internal.h) for the commonest types:
// Q4_0, Q5_0, Q8_0, Q4_K and Q6_K. The panel interleaves the rows by groups of 4 values, so
// unpacking is a transposition: the raw quant bytes of the 16 rows are transposed as 32-bit
// words first (every group of 4 values is one word in the block), then decoded in place, 16 rows
// at a time, since the decoding (nibble masks, shifts, bias) treats every byte alike. The scalar
// unpacking (gemm_panels.cpp) spent about a twelfth of the GEMM's time; this does the same work
// in a few instructions per block and row. Other targets, types and the last, partial panel of a
// matrix report "not handled" and take the scalar path.

#include <cstddef>
#include <cstdint>

#include "kernels/matmul_internal.h"
#include "quant/block_types.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/gemm_fill_simd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3

// The 16 rows of a panel: row r of block b starts at base + r * row_bytes + b * block_bytes.
struct PanelRows {
    const uint8_t* base;
    int64_t row_bytes;
    int64_t block_bytes;
    __m512i offsets;  // r * row_bytes for the gathers (fits int32: checked by the caller)
    const uint8_t* at(int r, int64_t b, std::size_t offset) const {
        return base + r * row_bytes + b * block_bytes + offset;
    }
};

// 32-bit word at `offset` in block b of each of the 16 rows.
HWY_INLINE __m512i GatherWords(const PanelRows& rows, int64_t b, std::size_t offset) {
    return _mm512_i32gather_epi32(rows.offsets, rows.at(0, b, offset), 1);
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

// Q4_0: word j of qs holds columns 4j .. 4j + 3 (low nibbles) and 16 + 4j .. (high nibbles).
void FillQ4_0(const PanelRows& rows, const IntPanel& p) {
    const __m512i bias = _mm512_set1_epi8(128 - 8);
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        __m512i w[4];
        Transpose16x4(rows, b, offsetof(block_q4_0, qs), w);
        for (int j = 0; j < 4; ++j) {
            StoreGroup(p, b * 32 + 4 * j, _mm512_add_epi8(LowNibbles(w[j]), bias));
            StoreGroup(p, b * 32 + 16 + 4 * j, _mm512_add_epi8(HighNibbles(w[j]), bias));
        }
        _mm512_store_ps(p.d + b * kPanelRows,
                        HalvesToFloat(GatherWords(rows, b, offsetof(block_q4_0, d)), false));
    }
}

// Q5_0: as Q4_0 plus the fifth bit of column c in bit c of qh, which a table spreads from
// 4 bits to bit 4 of 4 bytes.
void FillQ5_0(const PanelRows& rows, const IntPanel& p) {
    const __m512i bias = _mm512_set1_epi8(128 - 16);
    __m512i spread;  // word i: bit k of i -> 0x10 in byte k
    {
        alignas(64) uint32_t table[16];
        for (uint32_t i = 0; i < 16; ++i) {
            table[i] = 0;
            for (int k = 0; k < 4; ++k) table[i] |= ((i >> k) & 1u) << (8 * k + 4);
        }
        spread = _mm512_load_si512(table);
    }
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        __m512i w[4];
        Transpose16x4(rows, b, offsetof(block_q5_0, qs), w);
        const __m512i qh = GatherWords(rows, b, offsetof(block_q5_0, qh));
        for (int j = 0; j < 4; ++j) {
            // vpermd reads the low 4 bits of each index word.
            const __m512i fifth_low =
                _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 4 * j), spread);
            const __m512i fifth_high =
                _mm512_permutexvar_epi32(_mm512_srli_epi32(qh, 16 + 4 * j), spread);
            StoreGroup(p, b * 32 + 4 * j,
                       _mm512_add_epi8(_mm512_or_si512(LowNibbles(w[j]), fifth_low), bias));
            StoreGroup(p, b * 32 + 16 + 4 * j,
                       _mm512_add_epi8(_mm512_or_si512(HighNibbles(w[j]), fifth_high), bias));
        }
        _mm512_store_ps(p.d + b * kPanelRows,
                        HalvesToFloat(GatherWords(rows, b, offsetof(block_q5_0, d)), false));
    }
}

void FillQ8_0(const PanelRows& rows, const IntPanel& p) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));  // int8 + 128
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        __m512i w[8];
        Transpose16x8(rows, b, offsetof(block_q8_0, qs), w);
        for (int j = 0; j < 8; ++j) StoreGroup(p, b * 32 + 4 * j, _mm512_xor_si512(w[j], flip));
        _mm512_store_ps(p.d + b * kPanelRows,
                        HalvesToFloat(GatherWords(rows, b, offsetof(block_q8_0, d)), false));
    }
}

// Byte k of each word, as a 32-bit value.
HWY_INLINE __m512i Byte(__m512i words, int k) {
    return _mm512_and_si512(_mm512_srli_epi32(words, 8 * k), _mm512_set1_epi32(0xFF));
}

// Q4_K: bytes 32 * pair .. + 31 of qs hold sub-block 2 * pair (low nibbles) and 2 * pair + 1
// (high); the 6-bit scales and mins are unpacked for the 16 rows at once (see k_scales.h).
void FillQ4_K(const PanelRows& rows, const IntPanel& p) {
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(128));
    const __m512i six = _mm512_set1_epi32(63), four = _mm512_set1_epi32(15);
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        for (int pair = 0; pair < 4; ++pair) {
            __m512i w[8];
            Transpose16x8(rows, b, offsetof(block_q4_K, qs) + 32 * pair, w);
            for (int j = 0; j < 8; ++j) {
                StoreGroup(p, b * QK_K + 64 * pair + 4 * j,
                           _mm512_add_epi8(LowNibbles(w[j]), bias));
                StoreGroup(p, b * QK_K + 64 * pair + 32 + 4 * j,
                           _mm512_add_epi8(HighNibbles(w[j]), bias));
            }
        }
        const __m512i dd = GatherWords(rows, b, offsetof(block_q4_K, d));  // d, dmin
        _mm512_store_ps(p.d + b * kPanelRows, HalvesToFloat(dd, false));
        _mm512_store_ps(p.min_scale + b * kPanelRows,
                        _mm512_sub_ps(_mm512_setzero_ps(), HalvesToFloat(dd, true)));
        const __m512i s0 = GatherWords(rows, b, offsetof(block_q4_K, scales));
        const __m512i s1 = GatherWords(rows, b, offsetof(block_q4_K, scales) + 4);
        const __m512i s2 = GatherWords(rows, b, offsetof(block_q4_K, scales) + 8);
        __m512i scale[8], min[8];
        for (int j = 0; j < 4; ++j) {
            scale[j] = _mm512_and_si512(Byte(s0, j), six);
            min[j] = _mm512_and_si512(Byte(s1, j), six);
            scale[j + 4] = _mm512_or_si512(_mm512_and_si512(Byte(s2, j), four),
                                           _mm512_slli_epi32(_mm512_srli_epi32(Byte(s0, j), 6), 4));
            min[j + 4] = _mm512_or_si512(_mm512_srli_epi32(Byte(s2, j), 4),
                                         _mm512_slli_epi32(_mm512_srli_epi32(Byte(s1, j), 6), 4));
        }
        for (int j = 0; j < 8; ++j)
            _mm512_store_si512(p.scale + (b * 8 + j) * kPanelRows, scale[j]);
        for (int j = 0; j < 4; ++j) {
            _mm512_store_si512(p.mins + (b * 4 + j) * kPanelRows,
                               _mm512_or_si512(min[2 * j], _mm512_slli_epi32(min[2 * j + 1], 16)));
        }
    }
}

// Q6_K: in each half of 128 values, columns l, l + 32, l + 64, l + 96 (l < 32) take the low
// nibble of ql[l], of ql[l + 32], the high nibble of ql[l], of ql[l + 32], with bits 0-1, 2-3,
// 4-5, 6-7 of qh[l] on top, minus 32.
void FillQ6_K(const PanelRows& rows, const IntPanel& p) {
    const __m512i bias = _mm512_set1_epi8(128 - 32);
    const __m512i low2 = _mm512_set1_epi8(3);
    auto high_bits = [&](__m512i h, int shift) {  // bits shift, shift + 1 of each byte, at 4-5
        return _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, shift), low2), 4);
    };
    for (int64_t b = 0; b < p.n_blocks; ++b) {
        for (int half = 0; half < 2; ++half) {
            __m512i a[8], c[8], h[8];
            Transpose16x8(rows, b, offsetof(block_q6_K, ql) + 64 * half, a);
            Transpose16x8(rows, b, offsetof(block_q6_K, ql) + 64 * half + 32, c);
            Transpose16x8(rows, b, offsetof(block_q6_K, qh) + 32 * half, h);
            const int64_t col = b * QK_K + 128 * half;
            for (int j = 0; j < 8; ++j) {
                auto store = [&](int64_t at, __m512i nibbles, int shift) {
                    StoreGroup(
                        p, at,
                        _mm512_add_epi8(_mm512_or_si512(nibbles, high_bits(h[j], shift)), bias));
                };
                store(col + 4 * j, LowNibbles(a[j]), 0);
                store(col + 32 + 4 * j, LowNibbles(c[j]), 2);
                store(col + 64 + 4 * j, HighNibbles(a[j]), 4);
                store(col + 96 + 4 * j, HighNibbles(c[j]), 6);
            }
        }
        // d is the last field: read the word that ends with it.
        _mm512_store_ps(p.d + b * kPanelRows,
                        HalvesToFloat(GatherWords(rows, b, offsetof(block_q6_K, d) - 2), true));
        for (int k = 0; k < 4; ++k) {  // 16 int8 scales, 4 per word
            const __m512i words = GatherWords(rows, b, offsetof(block_q6_K, scales) + 4 * k);
            for (int i = 0; i < 4; ++i) {
                const __m512i scale = _mm512_srai_epi32(_mm512_slli_epi32(words, 24 - 8 * i), 24);
                _mm512_store_si512(p.scale + (b * 16 + 4 * k + i) * kPanelRows, scale);
            }
        }
    }
}

bool FillIntPanel(const WeightMatrix& w, int64_t row_begin, const IntPanel& panel) {
    const auto row_bytes = static_cast<int64_t>(row_size(w.type, w.n_cols));
    // Whole panels only, and gather offsets that fit 32 bits.
    if (row_begin + kPanelRows > w.n_rows || row_bytes > (int64_t{1} << 26)) return false;
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
    rows.base = reinterpret_cast<const uint8_t*>(w.data.data()) + row_begin * row_bytes;
    rows.row_bytes = row_bytes;
    rows.block_bytes = static_cast<int64_t>(type_size(w.type));
    rows.offsets =
        _mm512_mullo_epi32(_mm512_set1_epi32(static_cast<int32_t>(row_bytes)),
                           _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    fill(rows, panel);
    return true;
}

#else

bool FillIntPanel(const WeightMatrix&, int64_t, const IntPanel&) {
    return false;
}

#endif  // HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace minfer::kernels {

HWY_EXPORT(FillIntPanel);

bool fill_int_panel_simd(const WeightMatrix& w, int64_t row_begin, const IntPanel& panel) {
    return HWY_DYNAMIC_DISPATCH(FillIntPanel)(w, row_begin, panel);
}

}  // namespace minfer::kernels
#endif
