#pragma once
// Pieces of matmul shared between the driver (matmul.cpp), the scalar reference and the SIMD
// kernels (Highway, one copy per target). Not part of the public API.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "gguf/ggml_type.h"
#include "kernels/matmul.h"

namespace minfer::kernels {

// n rounded up to a whole number of 64-byte cache lines (the scratch regions of panels and
// activation tiles start on one).
constexpr std::size_t align64(std::size_t n) {
    return (n + 63) & ~std::size_t{63};
}

// x after conversion to the activation type: n_tokens rows of row_bytes each.
struct Activations {
    GgmlType type;  // Q8_0, Q8_1, Q8_K or F32 (F16/BF16 activations are kept as rounded f32)
    const std::byte* data;
    std::size_t row_bytes;
    int64_t n_tokens;
};

// Bytes of one activation row of n_cols values.
std::size_t activation_row_bytes(GgmlType activation_type, int64_t n_cols);

// The scalar reference: y[t * y_stride + r] for rows [row_begin, row_end) and every token.
void matmul_rows_scalar(const WeightMatrix& w, const Activations& act, int64_t row_begin,
                        int64_t row_end, float* y, int64_t y_stride);

// One weight row against one activation row, in ggml's integer/float arithmetic.
float dot_row_scalar(GgmlType type, const std::byte* w_row, const std::byte* act_row,
                     int64_t n_cols);

// ---- GEMM panels: kPanelRows weight rows unpacked once, then reused for every token ----

inline constexpr int kPanelRows = 16;

// Integer panels. Every quantized type is read as blocks (32 or 256 values) of sub-blocks (16 or
// 32 values) of small integers q with integer sub-block scales under float block scales:
//   32-value blocks (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL; one sub-block, Q8_0/Q8_1 activations):
//     y += sum_blocks(d * d_a * dot(q, a))  [+ min_scale * s_a for Q4_1/Q5_1]
//     (two float operations per block and token: the product of the two scales varies with both);
//   256-value blocks (K-quants, IQ4_XS, TQ1_0, TQ2_0; Q8_K activations, one d_a per block):
//     y += d_a * (d * sum_sub(scale * dot(q, a)) + min_scale * sum_sub(min * bsum_a))
//     so the sub-block sums stay integers until the end of the block.
// Layout of a panel of kPanelRows rows:
//   q:         per sub-block, per group of 4 values: kPanelRows rows x 4 bytes (64 bytes), each
//              the value + 128 (unsigned, the operand order of vpdpbusd),
//   scale:     per sub-block and row: the integer sub-block scale (int32; 256-value blocks),
//   d:         per block and row: the block's float scale d (f32),
//   min_scale: per block and row: -dmin, or Q4_1/Q5_1's offset m (f32; has_min only),
//   mins:      per pair of sub-blocks and row: the two integer mins as int16 (low half: the even
//              sub-block) (256-value blocks with has_min only).
// Rows past the matrix end are zero.
struct IntPanel {
    uint8_t* q;
    int32_t* scale;
    float* d;
    float* min_scale;
    int32_t* mins;
    int64_t n_sub;
    int64_t n_blocks;
    int sub_size;        // 16 or 32
    int subs_per_block;  // 1 (32-value blocks), 8 or 16
    bool has_min;
};
// Of n_valid_rows counted over panels of consecutive rows, how many fall in panel i.
constexpr int PanelValidRows(int n_valid_rows, int i) {
    return std::clamp(n_valid_rows - i * kPanelRows, 0, kPanelRows);
}
std::size_t int_panel_bytes(GgmlType type, int64_t n_cols);
IntPanel int_panel_at(std::byte* memory, GgmlType type, int64_t n_cols);
// Unpacks blocks [block_begin, block_begin + panel.n_blocks) of rows [row_begin, row_begin +
// kPanelRows) (clipped at n_rows) into the panel (int_panel_at of that many columns). Where SIMD
// unpacks, the bytes prefetch_delta further (the next panel or chunk; 0: none) are prefetched.
void fill_int_panel(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                    const IntPanel& panel, int64_t prefetch_delta = 0);

// Activations of the integer GEMM, in tiles of `width` tokens: kTokenTile, or 1 for a single token
// (dense rows: a padded tile would spread one token's 4-value groups 32 bytes apart, 8 times the
// L1 footprint). There is room for a whole last tile; the kernels never read its unused slots.
// A kernel reads a tile's tokens through one pointer:
//   q:    per tile, per group of 4 values: width tokens x 4 int8 (32 bytes for 8 tokens),
//   corr: per tile, sub-block and token: -128 * sum(q) (undoes the + 128 of the weights) (int32),
//   d:    per tile, block and token: the activation scale (f32),
//   sum:  per tile, block and token: Q8_1's s = d * sum(q) (f32; 32-value blocks with has_min),
//   bsum: per tile, pair of sub-blocks and token: the two sums of q as int16 (low half: the even
//         sub-block) (256-value blocks with has_min).
inline constexpr int kTokenTile = 8;

// A sub-block's dot product with codes stored as value + offset starts at -offset * sum(q), from
// its corr (-128 * sum(q), so the shift is exact): a shift, where `corr / 128 * offset` costs a
// signed division's five instructions in every sub-block of the kernels' inner loops.
constexpr int32_t OffsetCorrection(int32_t corr, int offset) {
    return (corr >> 7) * offset;
}

struct IntActivations {
    const int8_t* q;
    const int32_t* corr;
    const float* d;
    const float* sum;     // null unless used
    const int32_t* bsum;  // null unless used
    int64_t n_cols;
    int64_t n_sub;
    int64_t n_blocks;
    int width;  // tokens per tile
    // Start of tile `tile`'s data in each array.
    const int8_t* q_tile(int64_t tile) const { return q + tile * n_cols * width; }
    int64_t sub_tile(int64_t tile) const { return tile * n_sub * width; }
    int64_t block_tile(int64_t tile) const { return tile * n_blocks * width; }
    int64_t pair_tile(int64_t tile) const { return tile * (n_sub / 2) * width; }
};
// Tokens [0, n_tokens) in runs of 4, 2 or 1 that stay within one activation tile, as the panel
// kernels take them: f(std::integral_constant<int, T>{}, tile, slot, t) for the run of T tokens
// from token t (slot `slot` of tile `tile`).
template <class F>
inline void ForEachTokenRun(const IntActivations& a, int64_t n_tokens, F&& f) {
    for (int64_t t = 0; t < n_tokens;) {
        const int64_t tile = t / a.width;
        const int slot = static_cast<int>(t % a.width);
        const int64_t left = std::min<int64_t>(n_tokens - t, a.width - slot);
        if (left >= 4) {
            f(std::integral_constant<int, 4>{}, tile, slot, t);
            t += 4;
        } else if (left >= 2) {
            f(std::integral_constant<int, 2>{}, tile, slot, t);
            t += 2;
        } else {
            f(std::integral_constant<int, 1>{}, tile, slot, t);
            t += 1;
        }
    }
}

std::size_t int_activations_bytes(GgmlType weight_type, int64_t n_cols, int64_t n_tokens);
IntActivations int_activations_at(std::byte* memory, GgmlType weight_type, int64_t n_cols,
                                  int64_t n_tokens);
// Converts tokens [t_begin, t_end) of act into memory laid out for all n_tokens (threads may fill
// disjoint token ranges at once).
void fill_int_activations(GgmlType weight_type, const Activations& act, int64_t n_cols,
                          int64_t t_begin, int64_t t_end, std::byte* memory);

// Float panel (F32/F16/BF16 weights): per column k, kPanelRows f32 values (rows past the end 0).
std::size_t float_panel_bytes(int64_t n_cols);
// Columns [col_begin, col_begin + n_cols) of rows [row_begin, row_begin + kPanelRows), with the
// same prefetching as fill_int_panel.
void fill_float_panel(const WeightMatrix& w, int64_t row_begin, int64_t col_begin, int64_t n_cols,
                      float* panel, int64_t prefetch_delta = 0);

}  // namespace minfer::kernels
