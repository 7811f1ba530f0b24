// GEMV kernels (one token at a time), compiled once per Highway target. Memory-bound: each weight
// byte is read once per token while the activation row stays in L1. On AVX2 and AVX-512 the hot
// types (Q4_0, Q8_0, IQ4_NL, Q4_K, Q6_K, F16, BF16, F32) have kernels on 256-bit vectors (on
// Zen 4 a 512-bit operation costs two 256-bit ones, and 256 bits match the 32-value blocks);
// AVX-512 adds vpdpbusd (VNNI) through inline assembly. Other types and targets report "not
// handled" and the caller runs the scalar reference.

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

// How far ahead of the kernel the weight stream is prefetched.
constexpr int kPrefetchBytes = 256;

inline __m256i Load256(const void* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

struct alignas(32) Int32x8 {
    int32_t lanes[8];
};
struct alignas(32) Int8x32 {
    int8_t bytes[32];
};

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

// d(w) * d(x) for every block of a row of 32-blocks, 8 at a time through vcvtph2ps.
template <class Block>
void BlockScales(const Block* w, const Q8View& a, int64_t n_blocks, float* out) {
    int64_t b = 0;
    for (; b + 8 <= n_blocks; b += 8) {
        alignas(16) uint16_t halves[8];
        for (int k = 0; k < 8; ++k) halves[k] = w[b + k].d;
        const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(halves)));
        _mm256_storeu_ps(out + b, _mm256_mul_ps(dw, _mm256_loadu_ps(a.d.data() + b)));
    }
    for (; b < n_blocks; ++b) out[b] = HalfToFloat(w[b].d) * a.d[b];
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

// kRows rows at once: the activation pair is loaded once for all of them, and several weight
// streams in flight keep more memory requests outstanding.
template <bool kVnni, Nibbles kKind, int kRows, class Block>
void DotNibblePairs(const Block* const* w, const Q8View& a, int64_t n_blocks, float* scales,
                    float* out) {
    constexpr bool kFifthBit = kKind == Nibbles::kQ5_0 || kKind == Nibbles::kQ5_1;
    constexpr bool kOffset = kKind == Nibbles::kQ4_1 || kKind == Nibbles::kQ5_1;
    constexpr int kZeroShift = kKind == Nibbles::kQ4_0 ? 3 : kKind == Nibbles::kQ5_0 ? 4 : 0;
    const std::size_t stride = static_cast<std::size_t>(n_blocks) + 8;
    for (int r = 0; r < kRows; ++r) BlockScales(w[r], a, n_blocks, scales + r * stride);
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i spread = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
    __m256 acc[kRows];
    for (int r = 0; r < kRows; ++r) acc[r] = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= n_blocks; b += 2) {
        const std::size_t p = static_cast<std::size_t>(b / 2);
        const __m256i a_low = _mm256_load_si256(reinterpret_cast<const __m256i*>(&a.pair_low[p]));
        const __m256i a_high = _mm256_load_si256(reinterpret_cast<const __m256i*>(&a.pair_high[p]));
        __m256i start = _mm256_setzero_si256();
        if constexpr (kZeroShift > 0) {
            start = _mm256_slli_epi32(
                _mm256_load_si256(reinterpret_cast<const __m256i*>(&a.pair_neg_sum[p])),
                kZeroShift);
        }
        for (int r = 0; r < kRows; ++r) {
            if ((b & 3) == 0) {
                _mm_prefetch(reinterpret_cast<const char*>(w[r] + b) + kPrefetchBytes, _MM_HINT_T0);
            }
            const __m256i packed =
                _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(w[r][b + 1].qs),
                                    reinterpret_cast<const __m128i*>(w[r][b].qs));
            __m256i low = _mm256_and_si256(packed, low4);
            __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low4);
            if constexpr (kFifthBit) {
                uint32_t qh0, qh1;
                std::memcpy(&qh0, w[r][b].qh, 4);
                std::memcpy(&qh1, w[r][b + 1].qh, 4);
                low = _mm256_or_si256(low, FifthBits(qh0, qh1, 0));
                high = _mm256_or_si256(high, FifthBits(qh0, qh1, 1));
            }
            __m256i sum;
            if constexpr (kKind == Nibbles::kIq4Nl) {
                low = _mm256_shuffle_epi8(table, low);
                high = _mm256_shuffle_epi8(table, high);
                sum = DotS8S8<kVnni>(_mm256_setzero_si256(), low, a_low);
                sum = DotS8S8<kVnni>(sum, high, a_high);
            } else {
                sum = DotU8S8<kVnni>(start, low, a_low);
                sum = DotU8S8<kVnni>(sum, high, a_high);
            }
            const __m128 two = _mm_castpd_ps(
                _mm_load_sd(reinterpret_cast<const double*>(scales + r * stride + b)));
            const __m256 scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), spread);
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), scale, acc[r]);
        }
    }
    for (int r = 0; r < kRows; ++r) {
        float sum = HorizontalSum(acc[r]);
        if (b < n_blocks) {  // odd block count: the last block alone
            UnpackedBlock last;
            unpack_block(kNibbleType<kKind>, reinterpret_cast<const std::byte*>(w[r] + b), last);
            const int8_t* q8 = a.qs(b);
            int32_t isum = 0;
            for (int j = 0; j < 32; ++j) isum += last.q[j] * q8[j];
            sum += static_cast<float>(isum) * scales[r * stride + b];
            if constexpr (kOffset) sum -= last.dmin * a.s[b];
        }
        if constexpr (kOffset) {
            const int64_t paired = b;  // blocks [0, b) went through the vector loop
            sum += OffsetSum(w[r], a, paired);
        }
        out[r] = sum;
    }
}

// Rows [r0, r1) of a nibble-type matrix, four rows at a time.
template <bool kVnni, Nibbles kKind, class Block>
void NibbleRows(const std::byte* base, std::size_t row_bytes, int64_t r0, int64_t r1,
                const Q8View& a, int64_t n_blocks, float* scales, float* y) {
    constexpr int kRows = 4;
    auto row = [&](int64_t r) {
        return reinterpret_cast<const Block*>(base + static_cast<std::size_t>(r) * row_bytes);
    };
    int64_t r = r0;
    for (; r + kRows <= r1; r += kRows) {
        const Block* rows[kRows] = {row(r), row(r + 1), row(r + 2), row(r + 3)};
        DotNibblePairs<kVnni, kKind, kRows, Block>(rows, a, n_blocks, scales, y + r);
    }
    for (; r < r1; ++r) {
        const Block* one[1] = {row(r)};
        DotNibblePairs<kVnni, kKind, 1, Block>(one, a, n_blocks, scales, y + r);
    }
}

// Q8_0: signed weights against signed activations.
template <bool kVnni>
float DotQ8_0(const block_q8_0* w, const Q8View& a, int64_t n_blocks, float* scales) {
    BlockScales(w, a, n_blocks, scales);
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    auto block = [&](int64_t b, __m256 acc) {
        const __m256i p =
            DotS8S8<kVnni>(_mm256_setzero_si256(), Load256(w[b].qs), Load256(a.blocks[b].qs));
        return _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_broadcast_ss(scales + b), acc);
    };
    int64_t b = 0;
    for (; b + 2 <= n_blocks; b += 2) {
        acc0 = block(b, acc0);
        acc1 = block(b + 1, acc1);
    }
    if (b < n_blocks) acc0 = block(b, acc0);
    return HorizontalSum(_mm256_add_ps(acc0, acc1));
}

// The 8 six-bit scales (bytes 0-7) and mins (bytes 8-15) of a Q4_K / Q5_K super-block.
inline void KScalesMins(const uint8_t* packed, uint8_t out[16]) {
    uint32_t u[4];
    std::memcpy(u, packed, 12);
    constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
    u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
    const uint32_t mins_low = u[1] & kLow6;
    u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
    u[2] = mins_low;
    u[0] &= kLow6;
    std::memcpy(out, u, 16);
}

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

// Sums of the activation's bsums in pairs (one per Q4_K sub-block of 32), per super-block.
void PrepareBsumPairs(const block_q8_K* a, int64_t n_blocks, std::vector<Int32x8>& out) {
    out.resize(static_cast<std::size_t>(n_blocks));
    for (int64_t b = 0; b < n_blocks; ++b) {
        for (int j = 0; j < 8; ++j) out[b].lanes[j] = a[b].bsums[2 * j] + a[b].bsums[2 * j + 1];
    }
}

// Q4_K and Q5_K against Q8_K: per sub-block of 32, vpmaddubsw then vpmaddwd with the
// sub-block's scale (instead of 1), so the scales cost nothing extra; the mins multiply the
// activation's bsums. Q5_K adds a fifth bit from qh (bit 2j for sub-block 2j, 2j + 1 for 2j + 1).
template <class Block>
float DotQ45_K(const Block* w, const block_q8_K* a, const Int32x8* bsum_pairs, int64_t n_blocks) {
    constexpr bool kFive = std::is_same_v<Block, block_q5_K>;
    __m256 acc = _mm256_setzero_ps();
    __m256 min_acc = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    for (int64_t b = 0; b < n_blocks; ++b) {
        alignas(16) uint8_t sm[16];
        KScalesMins(w[b].scales, sm);
        const __m128i packed = _mm_load_si128(reinterpret_cast<const __m128i*>(sm));
        const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(packed));
        const __m256i mins = _mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8));
        const __m256i min_products = _mm256_mullo_epi32(
            mins, _mm256_load_si256(reinterpret_cast<const __m256i*>(&bsum_pairs[b])));
        __m256i isum = _mm256_setzero_si256();
        __m256i qh = _mm256_setzero_si256();
        if constexpr (kFive) qh = Load256(w[b].qh);
        for (int j = 0; j < 4; ++j) {
            const __m256i q = Load256(w[b].qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, low4);
            __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low4);
            if constexpr (kFive) {
                const __m256i bit16 = _mm256_set1_epi8(0x10);
                const __m256i m_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * j)));
                const __m256i m_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * j + 1)));
                lo = _mm256_or_si256(
                    lo,
                    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m_lo), m_lo), bit16));
                hi = _mm256_or_si256(
                    hi,
                    _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, m_hi), m_hi), bit16));
            }
            const __m256i p_lo = _mm256_maddubs_epi16(lo, Load256(a[b].qs + 64 * j));
            const __m256i p_hi = _mm256_maddubs_epi16(hi, Load256(a[b].qs + 64 * j + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_lo, BroadcastI16(scales, 2 * j)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p_hi, BroadcastI16(scales, 2 * j + 1)));
        }
        const float da = a[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(HalfToFloat(w[b].d) * da),
                              acc);
        min_acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                                  _mm256_set1_ps(HalfToFloat(w[b].dmin) * da), min_acc);
    }
    return HorizontalSum(_mm256_sub_ps(acc, min_acc));
}

// Q2_K and Q3_K against Q8_K: 2-bit planes (Q3_K adds a high bit from hmask and an offset of 4),
// 16 sub-blocks of 16. Each 32-value vector spans two sub-blocks, so the scale vector holds
// sub-block 2k in its low half and 2k + 1 in its high half, as in Q6_K.
template <class Block>
float DotQ23_K(const Block* w, const block_q8_K* a, int64_t n_blocks) {
    constexpr bool kThree = std::is_same_v<Block, block_q3_K>;
    __m256 acc = _mm256_setzero_ps();
    __m256 min_acc = _mm256_setzero_ps();
    const __m256i three = _mm256_set1_epi8(3);
    for (int64_t b = 0; b < n_blocks; ++b) {
        alignas(16) int8_t scales[16];
        __m256i isum;
        __m256i min_products = _mm256_setzero_si256();
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums));
        if constexpr (kThree) {
            for (int j = 0; j < 16; ++j) {
                const int low = j < 8 ? (w[b].scales[j] & 0x0F) : (w[b].scales[j - 8] >> 4);
                const int high = (w[b].scales[8 + (j % 4)] >> (2 * (j / 4))) & 3;
                scales[j] = static_cast<int8_t>((low | (high << 4)) - 32);
            }
            // Values are stored as 0..7 meaning -4..3: start at -4 * sum(scale * bsum).
            const __m256i offset = _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(scales))),
                bsums);
            isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 2));
        } else {
            const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
            _mm_store_si128(reinterpret_cast<__m128i*>(scales),
                            _mm_and_si128(packed, _mm_set1_epi8(0x0F)));
            const __m128i mins = _mm_and_si128(_mm_srli_epi16(packed, 4), _mm_set1_epi8(0x0F));
            min_products = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mins), bsums);
            isum = _mm256_setzero_si256();
        }
        const __m128i scales8 = _mm_load_si128(reinterpret_cast<const __m128i*>(scales));
        for (int half = 0; half < 2; ++half) {
            const __m256i q = Load256(w[b].qs + 32 * half);
            const int8_t* q8 = a[b].qs + 128 * half;
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_unpackhi_epi64(scales8, scales8)));
            __m256i hmask = _mm256_setzero_si256();
            if constexpr (kThree) hmask = Load256(w[b].hmask);
            for (int plane = 0; plane < 4; ++plane) {
                __m256i v =
                    _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * plane)), three);
                if constexpr (kThree) {
                    const __m256i bit =
                        _mm256_set1_epi8(static_cast<char>(1 << (4 * half + plane)));
                    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), bit);
                    v = _mm256_or_si256(v, _mm256_and_si256(set, _mm256_set1_epi8(4)));
                }
                const __m256i p = _mm256_maddubs_epi16(v, Load256(q8 + 32 * plane));
                const __m256i s = _mm256_blend_epi32(BroadcastI16(sc, 2 * plane),
                                                     BroadcastI16(sc, 2 * plane + 1), 0xF0);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
            }
        }
        const float da = a[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(HalfToFloat(w[b].d) * da),
                              acc);
        if constexpr (!kThree) {
            min_acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(min_products),
                                      _mm256_set1_ps(HalfToFloat(w[b].dmin) * da), min_acc);
        }
    }
    return HorizontalSum(_mm256_sub_ps(acc, min_acc));
}

// IQ4_XS against Q8_K: 8 sub-blocks of 32 with 6-bit scales (minus 32); the nibbles map through
// the IQ4_NL table to signed values, so the products go through |w| x sign(a, w).
float DotIq4Xs(const block_iq4_xs* w, const block_q8_K* a, int64_t n_blocks) {
    const __m256i table = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(kvalues_iq4nl)));
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
        __m256i isum = _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
            const int low = (w[b].scales_l[j / 2] >> (4 * (j % 2))) & 0x0F;
            const int high = (w[b].scales_h >> (2 * j)) & 3;
            const auto scale = static_cast<int16_t>((low | (high << 4)) - 32);
            const __m128i packed =
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * j));
            const __m256i codes =
                _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(packed),
                                                         _mm_srli_epi16(packed, 4), 1),
                                 low4);
            const __m256i values = _mm256_shuffle_epi8(table, codes);
            const __m256i q8 = Load256(a[b].qs + 32 * j);
            const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(values, values),
                                                   _mm256_sign_epi8(q8, values));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16(scale)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(HalfToFloat(w[b].d) * a[b].d), acc);
    }
    return HorizontalSum(acc);
}

// Q6_K against Q8_K: 6-bit values used unsigned (0..63), the offset of 32 folded in as
// -32 * sum(scale * bsum); one 32-value vector spans two sub-blocks of 16 (two scales).
float DotQ6_K(const block_q6_K* w, const block_q8_K* a, int64_t n_blocks) {
    __m256 acc = _mm256_setzero_ps();
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const __m128i scales8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
        const __m256i scales16 = _mm256_cvtepi8_epi16(scales8);
        const __m256i offset = _mm256_madd_epi16(
            scales16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(offset, 5));
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = w[b].ql + 64 * half;
            const uint8_t* qh = w[b].qh + 32 * half;
            const int8_t* q8 = a[b].qs + 128 * half;
            // The 8 scales of this half, as 16-bit values, in both 128-bit halves.
            const __m256i sc = _mm256_broadcastsi128_si256(
                _mm_cvtepi8_epi16(half == 0 ? scales8 : _mm_unpackhi_epi64(scales8, scales8)));
            const __m256i l0 = Load256(ql);
            const __m256i l1 = Load256(ql + 32);
            const __m256i h = Load256(qh);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, low4),
                                _mm256_and_si256(_mm256_slli_epi16(h, 4), bits45)),
                _mm256_or_si256(_mm256_and_si256(l1, low4),
                                _mm256_and_si256(_mm256_slli_epi16(h, 2), bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                                _mm256_and_si256(h, bits45)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                                _mm256_and_si256(_mm256_srli_epi16(h, 2), bits45))};
            for (int k = 0; k < 4; ++k) {
                const __m256i p = _mm256_maddubs_epi16(q[k], Load256(q8 + 32 * k));
                // Scale 2k for the low 16 values, 2k + 1 for the high 16.
                const __m256i s =
                    _mm256_blend_epi32(BroadcastI16(sc, 2 * k), BroadcastI16(sc, 2 * k + 1), 0xF0);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),
                              _mm256_set1_ps(HalfToFloat(w[b].d) * a[b].d), acc);
    }
    return HorizontalSum(acc);
}

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
    scales.resize(4 * (static_cast<std::size_t>(n_blocks32) + 8));
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

bool gemv_simd_handles(GgmlType type) {
    return HWY_DYNAMIC_DISPATCH(GemvHandles)(type);
}

bool gemv_rows_simd(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                    int64_t row_end, float* y) {
    return HWY_DYNAMIC_DISPATCH(GemvRows)(w, act, row_begin, row_end, y);
}

}  // namespace minfer::kernels
#endif
