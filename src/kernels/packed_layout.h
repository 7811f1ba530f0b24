#pragma once
// The interleaved ("repacked") weight layout of the CPU kernels, built once at load from a
// matrix in the file's layout. Private to the CPU backend: the graph and other backends keep
// seeing the file's bytes.
//
// Why: one token multiplies each weight once, so decoding is bound by how fast the weights
// stream in. In the file's layout a SIMD kernel that computes 16 rows at once (one zmm lane per
// row, the GEMM's arithmetic) must first transpose 16 rows' bytes, and the 16 rows are 16
// streams in memory; interleaved at load, the same kernel loads each vector as it is, and each
// thread reads one sequential stream.
//
// Layout. Rows are taken in groups of kPackedRows = 16 (the last group padded with zero rows).
// A "column group" is 4 consecutive values of a block: the kernels hold the 16 rows' 4 values of
// one column group in one 64-byte vector (row r in bytes 4r .. 4r + 3), as vpdpbusd wants them
// (AVX2 reads it as two halves of 8 rows, aarch64's NEON as four quarters of 4, sdot's operand). A
// row group's part of a stripe (below) is one run of bytes that the kernels read strictly in
// order, front to back, so that the hardware prefetcher keeps its stream: one core decoded Q8_0
// from DRAM at 11-13 GB/s with each group's scales in a plane of their own at its end, 25 with
// them beside their blocks, and Q6_K (scales read before the codes, stored after them) and Q5_K
// (fifth bits in units of their own) went from 10-11 to 27. On Zen 4 software prefetching only
// took from that (by 5-25 % at 0.5-8 KiB ahead, every type); the x86 kernels issue prefetches on
// Zen 3, Zen 5 and Intel's Xeons, whose prefetchers alone do not keep up (packed_simd.cpp).
// Per block:
//   the block's codes (a_bytes, a multiple of 64): 64-byte units of three kinds:
//     words: unit w is one 32-bit word of the file's block (bytes `offset` + 4w .. + 3) for the
//       16 rows: row r's copy at 4r. Quant nibbles stay as they are (byte k of a word holds
//       columns k and k + 16 of a 32-value block, or of a pair of K-quant sub-blocks); Q8_0's
//       bytes are stored XOR 0x80 (value + 128, the unsigned operand of vpdpbusd).
//     bit planes (Q5_0, Q5_1, Q5_K): the fifth bits of 32 values (8 column groups) in one unit,
//     laid
//       out as the codes they complete: byte 4r + c holds in bit g the fifth bit of row r's
//       column c of column group g. The AVX-512 kernels turn bit g into a byte mask (one
//       vptestmb) and add 16 under it; the AVX2 ones shift bit g to bit 4 (one 16-bit shift and
//       a mask) and or it in. Byte masks (one 64-bit mask per group, loaded into a k register)
//       took AVX2 6 instructions a group to spread: one Zen 4 core decoded Q5_0 from L3 at
//       18.5-19.2 GB/s with them, 25.5-26.2 with the planes (Q5_K 17-18 -> 21-23).
//     6-bit codes (Q6_K): the codes (value + 32) of 4 column groups G0-G3 in 3 units, G0-G2 in
//       the low 6 bits of each byte and G3's bits 2i, 2i + 1 in bits 6-7 of unit i: three masks
//       decode G0-G2 and three shifts, two bit selections and a mask G3.
//   the types whose f16 scale d is not on a word of the codes (Q4_0, Q5_0, Q8_0, IQ4_NL: d
//     first, then 16, 20 or 32 bytes; Q6_K: d last) also have "d units": one 64-byte unit per
//     pair of blocks 2p, 2p + 1, holding the 16 rows' d of block 2p as 16 f16 (32 bytes), then
//     those of block 2p + 1 (zero after an odd last block), placed before the pair's codes:
//     d unit, codes of 2p, codes of 2p + 1, d unit, ... (PackedLayout::d_offset, a_offset).
// Per type (block bytes: units of codes; d unit):
//   Q4_0    18 B: 4 words of qs;                                                   d
//   IQ4_NL  18 B: 4 words of qs;                                                   d
//   Q8_0    34 B: 8 words of qs ^ 0x80 (column group g = word g);                   d
//   Q5_0    22 B: 4 words of qs, 1 plane (fifth bits; bit g: column group g);        d
//   Q4_1    20 B: 1 word d|m, 4 words of qs;                                       -
//   Q5_1    24 B: 1 word d|m, 4 words of qs, 1 plane (as Q5_0's);                  -
//   Q4_K   144 B: 4 words (d|dmin, 12 bytes of scales), 32 words of qs;            -
//   Q5_K   176 B: 4 words (d|dmin, scales), then per pair of sub-blocks 2q, 2q + 1: 2 planes
//                 (fifth bits of sub-block 2q, then 2q + 1; bit j: column group j), 8 words of
//                 qs;                                                              -
//   Q6_K   210 B: 4 words of scales, 48 units of codes (units 4 + 3k .. 4 + 3k + 2: sub-block k
//                 of 16 values);                                                   d
//   IQ4_XS 136 B: 34 words (d|scales_h, scales_l, 32 of qs);                        -
// Float weights (F32, F16, BF16) take the same groups, stripes and bands with a "block" of one
// column: its 16 rows' values as they are in the file (64 or 32 bytes), row r at element r. In
// the file's layout the batch-invariant mode transposed 16 rows for every token (Qwen2 0.5B F16
// decoded 10-12 tokens/s that way, 33 in the GEMV mode); here one token loads each column's 16
// values as one vector and continues the same per-row chain of multiply-adds. The kernels take
// four groups at a time, so a band's groups are interleaved by fours ("quads", from the band's
// first group; the last quad of a band may have fewer, q): the bytes of a quad's chunks of a
// stripe hold column 0 of its q groups, then column 1 of them, ... (float_column_offset), one
// sequential run where four chunks one after the other were four streams (one core read F16
// from DRAM at 22-24 GB/s against 17-18).
// Stripes. Long rows are cut into stripes of stripe_blocks blocks (about kStripeBytes of one
// group's bytes; float weights: kFloatStripeColumns), each group's part of a stripe (a "chunk")
// laid out as above, its blocks numbered from the stripe's start. A kernel walks the chunks of a
// band (below) stripe by stripe, carrying each row's sum in y between stripes, so that the
// activations of one stripe are reused while they are still in L1: with a whole row per group,
// a group of 16 rows x 4864 Q4_0 values (43 KB, more than the 32 KB L1) evicted them before the
// next group came back to them, and one core read 21 GB/s from DRAM where rows of 2432 values
// read 29 (Q4_K 23 -> 30, Q6_K 18 -> 23).
//
// Bands. The groups are taken in bands of band_groups (about kBandBytes per stripe): the matrix
// holds band 0 (stripe 0 of its groups, stripe 1 of its groups, ...), then band 1, ... A band
// is the threads' unit of work (matmul.cpp hands out whole bands), so a thread reads each band
// as one sequential run, and the bands of its share one after the other: one stream, as a plain
// read. With stripes of all groups instead (a thread's groups' chunks of one stripe contiguous,
// then a jump to the next stripe), Llama 1.1B Q4_K_M decoded at 84-85 % of the read bandwidth
// on a Zen 3 with 2 threads, 87-88 % with the bands (Qwen2 0.5B Q4_0: 83-84, 85 %).
//
// A group takes 16 x the rows' bytes (plus at most 32 bytes of padding after an odd last block),
// so decoding reads as many bytes as from the file. A 3-D tensor (experts) is packed one 2-D matrix
// at a time: each matrix is its own run of bands.

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/matmul.h"

namespace minfer::kernels {

inline constexpr int kPackedRows = 16;
// The most bytes of one group's chunk of a stripe (see above; one core, Q5_0 4864 x 896 from DRAM:
// 8 KiB and 16 KiB as fast as a plain read of the same bytes, 32 KiB 8 % slower).
inline constexpr int64_t kStripeBytes = 16 * 1024;
// Float weights' stripes are 256 columns whatever the element size (8 or 16 KiB a group): the
// stripe's activations (1 KiB a token) stay in L1 while the groups of a band pass.
inline constexpr int64_t kFloatStripeColumns = 256;
// The most bytes of one stripe of a band (see above): a few microseconds of one thread's work,
// so that the last bands even out the threads' speeds.
inline constexpr int64_t kBandBytes = 64 * 1024;

struct PackedLayout {
    int64_t n_blocks = 0;       // blocks per row
    int64_t n_groups = 0;       // groups of kPackedRows rows
    int64_t a_bytes = 0;        // bytes of codes per block
    bool has_d_units = false;   // d units present
    int64_t stripe_blocks = 0;  // blocks per stripe (the last stripe may have fewer); even with
                                // d units but where one stripe holds the whole row
    int64_t group_bytes = 0;    // one group, all its chunks
    int64_t band_groups = 0;    // groups per band (the last band may have fewer)

    int64_t n_stripes() const { return (n_blocks + stripe_blocks - 1) / stripe_blocks; }
    int64_t n_bands() const { return (n_groups + band_groups - 1) / band_groups; }
    // Band b holds groups [band_begin(b), band_end(b)).
    int64_t band_begin(int64_t b) const { return b * band_groups; }
    int64_t band_end(int64_t b) const { return std::min(n_groups, (b + 1) * band_groups); }
    // The first block of stripe k, and its number of blocks.
    int64_t stripe_begin(int64_t k) const { return k * stripe_blocks; }
    int64_t stripe_size(int64_t k) const {
        return std::min(stripe_blocks, n_blocks - stripe_begin(k));
    }
    // Bytes of one group's chunk of nb blocks.
    int64_t chunk_bytes(int64_t nb) const {
        return nb * a_bytes + (has_d_units ? 64 * ((nb + 1) / 2) : 0);
    }
    // Offset in the matrix of group g's chunk of stripe k: in g's band, after the band's earlier
    // stripes and the earlier groups' chunks of stripe k.
    int64_t chunk_offset(int64_t g, int64_t k) const {
        const int64_t band = g / band_groups, first = band_begin(band);
        return first * group_bytes + k * (band_end(band) - first) * chunk_bytes(stripe_blocks) +
               (g - first) * chunk_bytes(stripe_size(k));
    }
    // Float weights: the first group of g's quad, and the elements from one of g's columns to
    // the next (16 per group of the quad).
    int64_t float_quad_begin(int64_t g) const {
        const int64_t first = band_begin(g / band_groups);
        return first + (g - first) / 4 * 4;
    }
    int64_t float_column_stride(int64_t g) const {
        const int64_t q0 = float_quad_begin(g);
        return std::min<int64_t>(4, band_end(g / band_groups) - q0) * kPackedRows;
    }
    // Float weights: offset in the matrix of group g's column b (counted from the start of
    // stripe k), its 16 rows' elem_bytes-sized values.
    int64_t float_column_offset(int64_t g, int64_t k, int64_t b, int64_t elem_bytes) const {
        const int64_t q0 = float_quad_begin(g);
        return chunk_offset(q0, k) +
               (b * float_column_stride(g) + (g - q0) * kPackedRows) * elem_bytes;
    }
    // Bytes of one pair of blocks with their d unit (has_d_units only).
    int64_t pair_bytes() const { return 64 + 2 * a_bytes; }
    // Offset in a chunk of its block b's codes (b counted from the stripe's start).
    int64_t a_offset(int64_t b) const {
        return has_d_units ? (b >> 1) * pair_bytes() + 64 + (b & 1) * a_bytes : b * a_bytes;
    }
    // Offset in a chunk of its block b's 16 f16 d (has_d_units only).
    int64_t d_offset(int64_t b) const { return (b >> 1) * pair_bytes() + 32 * (b & 1); }
    std::size_t bytes() const { return static_cast<std::size_t>(n_groups * group_bytes); }
};

// True for the types with an interleaved layout (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K,
// Q5_K, Q6_K, IQ4_XS, F32, F16, BF16).
bool has_packed_layout(GgmlType type);

// The layout of an n_cols x n_rows matrix of `type` (UnsupportedError without one).
PackedLayout packed_layout(GgmlType type, int64_t n_cols, int64_t n_rows);

// Writes groups [group_begin, group_end) of w's packed form into `packed` (the whole matrix's
// packed bytes, packed_layout(...).bytes() of them); threads may fill disjoint ranges at once.
void repack_groups(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                   std::byte* packed);

}  // namespace minfer::kernels
