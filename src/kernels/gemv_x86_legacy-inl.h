// x86 GEMV kernels of the 32-value block types against Q8_0 / Q8_1 activations: Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL (two blocks per vector, one row at a time) and Q8_0.
// Per-target code: included by gemv_simd.cpp once per Highway target (AVX2 and AVX-512 only).

// Highway's per-target include guard: toggles with each re-inclusion by foreach_target.h.
#if defined(MINFER_KERNELS_GEMV_X86_LEGACY_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef MINFER_KERNELS_GEMV_X86_LEGACY_INL_H_
#undef MINFER_KERNELS_GEMV_X86_LEGACY_INL_H_
#else
#define MINFER_KERNELS_GEMV_X86_LEGACY_INL_H_
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "hwy/highway.h"
#include "kernels/block_unpack.h"
#include "kernels/gemv_x86_common-inl.h"
#include "quant/block_types.h"

HWY_BEFORE_NAMESPACE();
namespace minfer::kernels {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

// Per-call view of Q8_0 or Q8_1 activations: block scales (and Q8_1's sums) as f32 and, for the
// nibble kernels, the blocks in pairs rearranged to match how two weight blocks unpack in one
// 256-bit vector (low nibbles of both, then high nibbles of both), with -sum(q) of each block in
// lanes 0 and 4 (shifted, it starts the accumulator of a type whose values are stored with an
// offset: 8 for Q4_0, 16 for Q5_0).
struct Q8View {
    const block_q8_0* blocks;  // Q8_0 activations only
    const std::byte* base;
    std::size_t stride;     // bytes per activation block
    std::size_t qs_offset;  // of qs inside a block
    std::vector<float> d, s;
    std::vector<Int8x32> pair_low, pair_high;
    std::vector<Int32x8> pair_neg_sum;
    const int8_t* qs(int64_t b) const {
        return reinterpret_cast<const int8_t*>(base + static_cast<std::size_t>(b) * stride +
                                               qs_offset);
    }
};

template <class ActBlock>
void PrepareQ8(const std::byte* row, int64_t n_blocks, bool pairs, Q8View& v) {
    const auto* blocks = reinterpret_cast<const ActBlock*>(row);
    v.blocks = reinterpret_cast<const block_q8_0*>(row);
    v.base = row;
    v.stride = sizeof(ActBlock);
    v.qs_offset = offsetof(ActBlock, qs);
    v.d.resize(static_cast<std::size_t>(n_blocks) + 8);
    v.s.resize(static_cast<std::size_t>(n_blocks) + 8);
    for (int64_t b = 0; b < n_blocks; ++b) {
        v.d[b] = HalfToFloat(blocks[b].d);
        if constexpr (std::is_same_v<ActBlock, block_q8_1>) v.s[b] = HalfToFloat(blocks[b].s);
    }
    if (!pairs) return;
    const auto n_pairs = static_cast<std::size_t>((n_blocks + 1) / 2);
    v.pair_low.resize(n_pairs);
    v.pair_high.resize(n_pairs);
    v.pair_neg_sum.resize(n_pairs);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const int8_t* q = blocks[b].qs;
        const auto p = static_cast<std::size_t>(b / 2);
        const int half = static_cast<int>(b % 2);
        std::memcpy(v.pair_low[p].bytes + 16 * half, q, 16);
        std::memcpy(v.pair_high[p].bytes + 16 * half, q + 16, 16);
        int32_t sum = 0;
        for (int i = 0; i < 32; ++i) sum += q[i];
        if (half == 0) v.pair_neg_sum[p] = Int32x8{};
        v.pair_neg_sum[p].lanes[4 * half] = -sum;
    }
}

// d(w) * d(x) of the 8 blocks from w (f16 block scales times the activations' f32 ones).
template <class Block>
HWY_INLINE __m256 ChunkScales(const Block* w, const float* ad) {
#if HWY_TARGET == HWY_AVX3
    // Collecting the scales one by one took as long as the Q4_0 dot products. Blocks start at
    // even addresses with d first, so the 8 scales are 16-bit words kWords apart: vpermt2w picks
    // those within the first 128 bytes of the chunk, and for blocks of more than 18 bytes a
    // second one those beyond, from the 128 bytes that end with the last scale.
    constexpr int kWords = static_cast<int>(sizeof(Block) / 2);
    constexpr int kSecond = 7 * kWords + 1 - 64;  // first word of the second window
    static_assert(sizeof(Block) % 2 == 0 && kWords >= 8 && kWords <= 18);
    constexpr auto kIndex = [](int first) {
        std::array<int16_t, 32> index{};
        for (int k = 0; k < 8; ++k)
            index[k] = static_cast<int16_t>(std::max(0, k * kWords - first));
        return index;
    };
    alignas(64) static constexpr std::array<int16_t, 32> kFirstIndex = kIndex(0);
    const auto* bytes = reinterpret_cast<const std::byte*>(w);
    // Hidden from the optimizer, which otherwise turns the permutation of two loads with a
    // known index back into eight 16-bit loads and inserts.
    __m512i first_index = _mm512_load_si512(kFirstIndex.data());
    asm("" : "+v"(first_index));
    __m512i d = _mm512_permutex2var_epi16(_mm512_loadu_si512(bytes), first_index,
                                          _mm512_loadu_si512(bytes + 64));
    if constexpr (kSecond > 0) {
        alignas(64) static constexpr std::array<int16_t, 32> kSecondIndex = kIndex(kSecond);
        constexpr auto kBeyond = [] {
            __mmask32 mask = 0;
            for (int k = 0; k < 8; ++k) mask |= (k * kWords > 63 ? 1u : 0u) << k;
            return mask;
        }();
        const std::byte* second = bytes + 2 * kSecond;
        __m512i second_index = _mm512_load_si512(kSecondIndex.data());
        asm("" : "+v"(second_index));
        d = _mm512_mask_blend_epi16(
            kBeyond, d,
            _mm512_permutex2var_epi16(_mm512_loadu_si512(second), second_index,
                                      _mm512_loadu_si512(second + 64)));
    }
    const __m256 dw = _mm256_cvtph_ps(_mm512_castsi512_si128(d));
#else
    alignas(16) uint16_t halves[8];
    for (int k = 0; k < 8; ++k) halves[k] = w[k].d;
    const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(halves)));
#endif
    return _mm256_mul_ps(dw, _mm256_loadu_ps(ad));
}

// ChunkScales' 8 results for blocks [b0, b0 + 8) of a row, else the scalar products.
template <class Block>
HWY_INLINE void BlockScales(const Block* w, const Q8View& a, int64_t b0, int64_t b1, float* out) {
    int64_t b = b0;
    for (; b + 8 <= b1; b += 8) _mm256_storeu_ps(out + b, ChunkScales(w + b, a.d.data() + b));
    for (; b < b1; ++b) out[b] = HalfToFloat(w[b].d) * a.d[b];
}

// The 32-value types with 4-bit codes, two blocks at a time: one 256-bit vector holds both
// blocks' nibbles. Q4_0 and Q5_0 use their codes unsigned (the accumulator starts at
// -offset * sum(a)); Q5_0 and Q5_1 add a fifth bit from qh; Q4_1 and Q5_1 add m * s per block
// (s = Q8_1's scaled sum); IQ4_NL maps the codes through its table to signed values.
enum class Nibbles { kQ4_0, kQ4_1, kQ5_0, kQ5_1, kIq4Nl };

template <Nibbles kKind>
constexpr GgmlType kNibbleType = kKind == Nibbles::kQ4_0   ? GgmlType::Q4_0
                                 : kKind == Nibbles::kQ4_1 ? GgmlType::Q4_1
                                 : kKind == Nibbles::kQ5_0 ? GgmlType::Q5_0
                                 : kKind == Nibbles::kQ5_1 ? GgmlType::Q5_1
                                                           : GgmlType::IQ4_NL;

// Bit i % 8 of byte i / 8 of a block's qh, as 0x10 in byte i: the fifth bits of elements 0-15
// (`which` 0) or 16-31 (`which` 1) of two blocks, one per 128-bit half.
inline __m256i FifthBits(uint32_t qh0, uint32_t qh1, int which) {
    const __m256i both =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_cvtsi32_si128(static_cast<int>(qh0))),
                                _mm_cvtsi32_si128(static_cast<int>(qh1)), 1);
    const char lo = static_cast<char>(2 * which);
    const char hi = static_cast<char>(2 * which + 1);
    const __m256i spread =
        _mm256_setr_epi8(lo, lo, lo, lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi, lo, lo, lo,
                         lo, lo, lo, lo, lo, hi, hi, hi, hi, hi, hi, hi, hi);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i bytes = _mm256_and_si256(_mm256_shuffle_epi8(both, spread), bit);
    return _mm256_and_si256(_mm256_cmpeq_epi8(bytes, bit), _mm256_set1_epi8(0x10));
}

// sum over blocks of m * s (Q4_1, Q5_1), 8 blocks at a time.
template <class Block>
float OffsetSum(const Block* w, const Q8View& a, int64_t n_blocks) {
    __m256 acc = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
        alignas(16) uint16_t halves[8];
        for (int k = 0; k < 8; ++k) halves[k] = w[b + k].m;
        const __m256 m = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(halves)));
        acc = _mm256_fmadd_ps(m, _mm256_loadu_ps(a.s.data() + b), acc);
    }
    float sum = HorizontalSum(acc);
    for (; b < n_blocks; ++b) sum += HalfToFloat(w[b].m) * a.s[b];
    return sum;
}

// One row. (Four rows at once, sharing each activation load, streamed from DRAM at 60 % of
// the one-row speed: they fill the reorder window before enough weight lines are requested.)
template <bool kVnni, Nibbles kKind, class Block>
float DotNibblePairs(const Block* w, const Q8View& a, int64_t n_blocks, float* scales) {
    constexpr bool kFifthBit = kKind == Nibbles::kQ5_0 || kKind == Nibbles::kQ5_1;
    constexpr bool kOffset = kKind == Nibbles::kQ4_1 || kKind == Nibbles::kQ5_1;
    constexpr int kZeroShift = kKind == Nibbles::kQ4_0 ? 3 : kKind == Nibbles::kQ5_0 ? 4 : 0;
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
    // Four accumulators, so that consecutive pairs do not wait on each other's multiply-add.
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    // Blocks b and b + 1 into acc[j]; `scale` holds their two scales, each in 4 lanes.
    auto pair_step = [&](int64_t b, int j, __m256 scale) HWY_ATTR {
        if ((b & 3) == 0) {
            _mm_prefetch(reinterpret_cast<const char*>(w + b) + kFarPrefetchBytes, _MM_HINT_T0);
        }
        const std::size_t p = static_cast<std::size_t>(b / 2);
        const __m256i packed = _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(w[b + 1].qs),
                                                   reinterpret_cast<const __m128i*>(w[b].qs));
        __m256i low = _mm256_and_si256(packed, low4);
        __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
        if constexpr (kFifthBit) {
            uint32_t qh0, qh1;
            std::memcpy(&qh0, w[b].qh, 4);
            std::memcpy(&qh1, w[b + 1].qh, 4);
            low = _mm256_or_si256(low, FifthBits(qh0, qh1, 0));
            high = _mm256_or_si256(high, FifthBits(qh0, qh1, 1));
        }
        const __m256i a_low = _mm256_load_si256(reinterpret_cast<const __m256i*>(&a.pair_low[p]));
        const __m256i a_high = _mm256_load_si256(reinterpret_cast<const __m256i*>(&a.pair_high[p]));
        __m256i sum;
        if constexpr (kKind == Nibbles::kIq4Nl) {
            low = _mm256_shuffle_epi8(table, low);
            high = _mm256_shuffle_epi8(table, high);
            sum = DotS8S8<kVnni>(_mm256_setzero_si256(), low, a_low);
            sum = DotS8S8<kVnni>(sum, high, a_high);
        } else {
            __m256i start = _mm256_setzero_si256();
            if constexpr (kZeroShift > 0) {
                start = _mm256_slli_epi32(
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(&a.pair_neg_sum[p])),
                    kZeroShift);
            }
            sum = DotU8S8<kVnni>(start, low, a_low);
            sum = DotU8S8<kVnni>(sum, high, a_high);
        }
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[j]);
    };
    // Whole chunks of 8 blocks keep their scales in a register; the last blocks go through memory.
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
        const __m256 chunk = ChunkScales(w + b, a.d.data() + b);
        for (int j = 0; j < 4; ++j) {
            const __m256i spread = _mm256_setr_epi32(2 * j, 2 * j, 2 * j, 2 * j, 2 * j + 1,
                                                     2 * j + 1, 2 * j + 1, 2 * j + 1);
            pair_step(b + 2 * j, j, _mm256_permutevar8x32_ps(chunk, spread));
        }
    }
    BlockScales(w, a, b, n_blocks, scales);
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    for (; b + 2 <= n_blocks; b += 2) {
        const __m128 two = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(scales + b)));
        pair_step(b, 0, _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), spread));
    }
    float sum =
        HorizontalSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    if (b < n_blocks) {  // odd block count: the last block alone
        UnpackedBlock last;
        unpack_block(kNibbleType<kKind>, reinterpret_cast<const std::byte*>(w + b), last);
        const int8_t* q8 = a.qs(b);
        int32_t isum = 0;
        for (int j = 0; j < 32; ++j) isum += last.q[j] * q8[j];
        sum += static_cast<float>(isum) * scales[b];
        if constexpr (kOffset) sum -= last.dmin * a.s[b];
    }
    if constexpr (kOffset) sum += OffsetSum(w, a, b);  // blocks [0, b) of the vector loop
    return sum;
}

// Rows [r0, r1) of a nibble-type matrix.
template <bool kVnni, Nibbles kKind, class Block>
void NibbleRows(const std::byte* base, std::size_t row_bytes, int64_t r0, int64_t r1,
                const Q8View& a, int64_t n_blocks, float* scales, float* y) {
    for (int64_t r = r0; r < r1; ++r) {
        const auto* row =
            reinterpret_cast<const Block*>(base + static_cast<std::size_t>(r) * row_bytes);
        y[r] = DotNibblePairs<kVnni, kKind, Block>(row, a, n_blocks, scales);
    }
}

// Q8_0: signed weights against signed activations.
template <bool kVnni>
float DotQ8_0(const block_q8_0* w, const Q8View& a, int64_t n_blocks, float* scales) {
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    auto block = [&](int64_t b, int j, __m256 scale) HWY_ATTR {
        const __m256i p =
            DotS8S8<kVnni>(_mm256_setzero_si256(), Load256(w[b].qs), Load256(a.blocks[b].qs));
        acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), scale, acc[j]);
    };
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
        const __m256 chunk = ChunkScales(w + b, a.d.data() + b);
        for (int j = 0; j < 8; ++j)
            block(b + j, j % 4, _mm256_permutevar8x32_ps(chunk, _mm256_set1_epi32(j)));
    }
    BlockScales(w, a, b, n_blocks, scales);
    for (; b < n_blocks; ++b) block(b, 0, _mm256_broadcast_ss(scales + b));
    return HorizontalSum(
        _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
}

#endif  // HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace minfer::kernels
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
