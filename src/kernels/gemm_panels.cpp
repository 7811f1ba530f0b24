// Weight panels of the GEMM path (see matmul_internal.h): a panel is unpacked once and then
// multiplied with every token of the batch. Whole panels of the commonest types are unpacked
// with SIMD where the CPU allows (gemm_fill_simd.cpp); this is the portable path.

#include <bit>
#include <cstddef>
#include <cstring>

#include "core/half.h"
#include "kernels/block_unpack.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_simd.h"
#include "quant/block_types.h"
#include "quant/k_scales.h"

namespace minfer::kernels {
namespace {

struct PanelSizes {
    std::size_t q, per_sub, per_block, per_pair;
};

PanelSizes panel_sizes(const UnpackLayout& layout, int64_t n_cols) {
    const auto n_sub = static_cast<std::size_t>(n_cols / layout.sub_size);
    const auto n_blocks = static_cast<std::size_t>(n_cols / layout.block_values);
    return {align64(static_cast<std::size_t>(n_cols) * kPanelRows),
            align64(n_sub * kPanelRows * sizeof(int32_t)),
            align64(n_blocks * kPanelRows * sizeof(float)),
            align64((n_sub + 1) / 2 * kPanelRows * sizeof(int32_t))};
}

}  // namespace

std::size_t int_panel_bytes(GgmlType type, int64_t n_cols) {
    const PanelSizes s = panel_sizes(unpack_layout(type), n_cols);
    return s.q + s.per_sub + 2 * s.per_block + s.per_pair;
}

IntPanel int_panel_at(std::byte* memory, GgmlType type, int64_t n_cols) {
    const UnpackLayout layout = unpack_layout(type);
    const PanelSizes s = panel_sizes(layout, n_cols);
    IntPanel panel{};
    std::byte* p = memory;
    panel.q = reinterpret_cast<uint8_t*>(p);
    p += s.q;
    panel.scale = reinterpret_cast<int32_t*>(p);
    p += s.per_sub;
    panel.d = reinterpret_cast<float*>(p);
    p += s.per_block;
    panel.min_scale = reinterpret_cast<float*>(p);
    p += s.per_block;
    panel.mins = reinterpret_cast<int32_t*>(p);
    panel.n_sub = n_cols / layout.sub_size;
    panel.n_blocks = n_cols / layout.block_values;
    panel.sub_size = layout.sub_size;
    panel.subs_per_block = layout.block_values / layout.sub_size;
    panel.has_min = layout.has_min;
    return panel;
}

namespace {

static_assert(std::endian::native == std::endian::little, "SWAR unpacking assumes little endian");

// The fast paths below decode 8 values at a time in a 64-bit word (byte i = value i), and none
// of their per-byte additions carries into the next byte.
constexpr uint64_t kLowNibbles = 0x0F0F0F0F0F0F0F0Full;
constexpr uint64_t kLow2Bits = 0x0303030303030303ull;
constexpr uint64_t bytes_of(uint8_t b) {
    return 0x0101010101010101ull * b;
}

uint64_t load64(const uint8_t* p) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// Bit i of the index becomes bit 4 of byte i (Q5_0's fifth bits).
struct FifthBitTable {
    uint64_t words[256];
    constexpr FifthBitTable() : words{} {
        for (int x = 0; x < 256; ++x) {
            for (int i = 0; i < 8; ++i) {
                if ((x >> i) & 1) words[x] |= uint64_t{0x10} << (8 * i);
            }
        }
    }
};
constexpr FifthBitTable kFifthBit{};

// Block b of a row, read through byte loads: copying a whole block into a struct first stalls
// the 8-byte loads that straddle the pieces of the copy (store forwarding fails).
template <class Block>
const uint8_t* block_at(const std::byte* w_row, int64_t b) {
    return reinterpret_cast<const uint8_t*>(w_row) + b * static_cast<int64_t>(sizeof(Block));
}

float load_f16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    return f16_to_f32(h);
}

// Panel bytes of (column col, row): groups of 4 values of a row go kPanelRows * 4 bytes apart.
uint8_t* panel_q_at(const IntPanel& panel, int64_t col, int row) {
    return panel.q + ((col / 4) * kPanelRows + row) * 4;
}

// Stores the 8 values of `word` (already + 128) at q = panel_q_at(col, row), col a multiple of 8.
void store_word(uint64_t word, uint8_t* q) {
    const auto low = static_cast<uint32_t>(word);
    const auto high = static_cast<uint32_t>(word >> 32);
    std::memcpy(q, &low, 4);
    std::memcpy(q + kPanelRows * 4, &high, 4);
}

// Writes n values (value + 128) of one row starting at column `col`.
void scatter_values(const uint8_t* biased, int n, const IntPanel& panel, int64_t col, int row) {
    uint8_t* q = panel_q_at(panel, col, row);
    for (int g = 0; g < n / 4; ++g) std::memcpy(q + g * kPanelRows * 4, biased + g * 4, 4);
}

// The scales of 32-value block b of a row: f16 scale d, and the offset of Q4_1/Q5_1.
void set_block32_scales(const IntPanel& panel, int64_t b, int row, float d, float offset) {
    panel.d[b * kPanelRows + row] = d;
    panel.min_scale[b * kPanelRows + row] = offset;
}

// Fast paths for the commonest types (the generic unpack costs several times more per block):
// they write exactly what unpack_block's decoding would. Words of 8 values: column c of a
// 32-value block is nibble c of byte c % 16 (low nibbles first).
void fill_row_q4_0(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    constexpr uint64_t kBias = bytes_of(128 - 8);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = block_at<block_q4_0>(w_row, b);
        const uint8_t* qs = block + offsetof(block_q4_0, qs);
        const uint64_t w0 = load64(qs), w1 = load64(qs + 8);
        uint8_t* q = panel_q_at(panel, b * 32, row);
        store_word((w0 & kLowNibbles) + kBias, q);
        store_word((w1 & kLowNibbles) + kBias, q + 2 * 64);
        store_word(((w0 >> 4) & kLowNibbles) + kBias, q + 4 * 64);
        store_word(((w1 >> 4) & kLowNibbles) + kBias, q + 6 * 64);
        set_block32_scales(panel, b, row, load_f16(block + offsetof(block_q4_0, d)), 0.0f);
    }
}

void fill_row_q5_0(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    constexpr uint64_t kBias = bytes_of(128 - 16);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = block_at<block_q5_0>(w_row, b);
        uint32_t qh;  // bit c: fifth bit of column c
        std::memcpy(&qh, block + offsetof(block_q5_0, qh), 4);
        const uint8_t* qs = block + offsetof(block_q5_0, qs);
        const uint64_t w0 = load64(qs), w1 = load64(qs + 8);
        uint8_t* q = panel_q_at(panel, b * 32, row);
        store_word(((w0 & kLowNibbles) | kFifthBit.words[qh & 0xFF]) + kBias, q);
        store_word(((w1 & kLowNibbles) | kFifthBit.words[(qh >> 8) & 0xFF]) + kBias, q + 2 * 64);
        store_word((((w0 >> 4) & kLowNibbles) | kFifthBit.words[(qh >> 16) & 0xFF]) + kBias,
                   q + 4 * 64);
        store_word((((w1 >> 4) & kLowNibbles) | kFifthBit.words[qh >> 24]) + kBias, q + 6 * 64);
        set_block32_scales(panel, b, row, load_f16(block + offsetof(block_q5_0, d)), 0.0f);
    }
}

void fill_row_q8_0(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = block_at<block_q8_0>(w_row, b);
        uint8_t* q = panel_q_at(panel, b * 32, row);
        for (int k = 0; k < 4; ++k) {
            const uint64_t w = load64(block + offsetof(block_q8_0, qs) + 8 * k);
            store_word(w ^ bytes_of(0x80), q + 2 * k * 64);  // int8 + 128
        }
        set_block32_scales(panel, b, row, load_f16(block + offsetof(block_q8_0, d)), 0.0f);
    }
}

void fill_row_q4_k(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    constexpr uint64_t kBias = bytes_of(128);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = block_at<block_q4_K>(w_row, b);
        const uint8_t* qs = block + offsetof(block_q4_K, qs);
        const uint8_t* scales = block + offsetof(block_q4_K, scales);
        // Bytes 32 * pair .. + 31: sub-block 2 * pair in the low nibbles, 2 * pair + 1 high.
        for (int pair = 0; pair < 4; ++pair) {
            uint8_t* q = panel_q_at(panel, b * QK_K + pair * 64, row);
            for (int k = 0; k < 4; ++k) {
                const uint64_t w = load64(qs + pair * 32 + 8 * k);
                store_word((w & kLowNibbles) + kBias, q + 2 * k * 64);
                store_word(((w >> 4) & kLowNibbles) + kBias, q + (8 + 2 * k) * 64);
            }
            const ScaleMin even = unpack_scale_min_k4(pair * 2, scales);
            const ScaleMin odd = unpack_scale_min_k4(pair * 2 + 1, scales);
            panel.scale[(b * 8 + pair * 2) * kPanelRows + row] = even.scale;
            panel.scale[(b * 8 + pair * 2 + 1) * kPanelRows + row] = odd.scale;
            panel.mins[(b * 4 + pair) * kPanelRows + row] = even.min | (odd.min << 16);
        }
        panel.d[b * kPanelRows + row] = load_f16(block + offsetof(block_q4_K, d));
        panel.min_scale[b * kPanelRows + row] = -load_f16(block + offsetof(block_q4_K, dmin));
    }
}

void fill_row_q6_k(const std::byte* w_row, int64_t n_blocks, const IntPanel& panel, int row) {
    constexpr uint64_t kBias = bytes_of(128 - 32);
    for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = block_at<block_q6_K>(w_row, b);
        const auto* scales = reinterpret_cast<const int8_t*>(block + offsetof(block_q6_K, scales));
        // Each half of 128 values: columns l, l + 32, l + 64, l + 96 (l < 32) take the low
        // nibble of ql[l], of ql[l + 32], the high nibble of ql[l], of ql[l + 32], and bits
        // 0-1, 2-3, 4-5, 6-7 of qh[l] on top.
        for (int half = 0; half < 2; ++half) {
            const uint8_t* ql = block + offsetof(block_q6_K, ql) + half * 64;
            const uint8_t* qh = block + offsetof(block_q6_K, qh) + half * 32;
            for (int k = 0; k < 4; ++k) {
                const uint64_t a = load64(ql + 8 * k), c = load64(ql + 32 + 8 * k);
                const uint64_t h = load64(qh + 8 * k);
                const int64_t col = b * QK_K + half * 128 + 8 * k;
                store_word(((a & kLowNibbles) | ((h & kLow2Bits) << 4)) + kBias,
                           panel_q_at(panel, col, row));
                store_word(((c & kLowNibbles) | (((h >> 2) & kLow2Bits) << 4)) + kBias,
                           panel_q_at(panel, col + 32, row));
                store_word((((a >> 4) & kLowNibbles) | (((h >> 4) & kLow2Bits) << 4)) + kBias,
                           panel_q_at(panel, col + 64, row));
                store_word((((c >> 4) & kLowNibbles) | (((h >> 6) & kLow2Bits) << 4)) + kBias,
                           panel_q_at(panel, col + 96, row));
            }
        }
        for (int s = 0; s < 16; ++s) panel.scale[(b * 16 + s) * kPanelRows + row] = scales[s];
        panel.d[b * kPanelRows + row] = load_f16(block + offsetof(block_q6_K, d));
    }
}

// Any type, through the common block decoder.
void fill_row_generic(GgmlType type, const std::byte* w_row, const IntPanel& panel, int row) {
    const std::size_t block_bytes = type_size(type);
    const int block_values = panel.subs_per_block * panel.sub_size;
    UnpackedBlock block;
    uint8_t biased[QK_K];
    for (int64_t b = 0; b < panel.n_blocks; ++b) {
        unpack_block(type, w_row + static_cast<std::size_t>(b) * block_bytes, block);
        for (int i = 0; i < block_values; ++i) biased[i] = static_cast<uint8_t>(block.q[i] + 128);
        scatter_values(biased, block_values, panel, b * block_values, row);
        if (panel.subs_per_block == 1) {
            // 32-value blocks: scale[0] is 1, min[0] 1 where there is an offset.
            set_block32_scales(panel, b, row, block.d * static_cast<float>(block.scale[0]),
                               -block.dmin * static_cast<float>(block.min[0]));
            continue;
        }
        for (int j = 0; j < panel.subs_per_block; ++j) {
            panel.scale[(b * panel.subs_per_block + j) * kPanelRows + row] = block.scale[j];
        }
        for (int j = 0; j < panel.subs_per_block / 2; ++j) {
            panel.mins[(b * panel.subs_per_block / 2 + j) * kPanelRows + row] =
                (block.min[2 * j] & 0xFFFF) | (block.min[2 * j + 1] << 16);
        }
        panel.d[b * kPanelRows + row] = block.d;
        panel.min_scale[b * kPanelRows + row] = -block.dmin;
    }
}

void clear_row(const IntPanel& panel, int row) {
    const int64_t n_cols = panel.n_sub * panel.sub_size;
    for (int64_t g = 0; g < n_cols / 4; ++g) {
        std::memset(panel.q + (g * kPanelRows + row) * 4, 128, 4);  // value 0
    }
    for (int64_t s = 0; s < panel.n_sub; ++s) panel.scale[s * kPanelRows + row] = 0;
    for (int64_t s = 0; s < (panel.n_sub + 1) / 2; ++s) panel.mins[s * kPanelRows + row] = 0;
    for (int64_t b = 0; b < panel.n_blocks; ++b) {
        panel.d[b * kPanelRows + row] = 0.0f;
        panel.min_scale[b * kPanelRows + row] = 0.0f;
    }
}

}  // namespace

void fill_int_panel(const WeightMatrix& w, int64_t row_begin, int64_t block_begin,
                    const IntPanel& panel, int64_t prefetch_delta) {
    if (fill_int_panel_simd(w, row_begin, block_begin, panel, prefetch_delta)) return;
    const std::size_t w_row_bytes = row_size(w.type, w.n_cols);
    const std::size_t skip = static_cast<std::size_t>(block_begin) * type_size(w.type);
    for (int row = 0; row < kPanelRows; ++row) {
        const int64_t r = row_begin + row;
        if (r >= w.n_rows) {
            clear_row(panel, row);
            continue;
        }
        const std::byte* w_row = w.data.data() + static_cast<std::size_t>(r) * w_row_bytes + skip;
        switch (w.type) {
            case GgmlType::Q4_0:
                fill_row_q4_0(w_row, panel.n_blocks, panel, row);
                break;
            case GgmlType::Q5_0:
                fill_row_q5_0(w_row, panel.n_blocks, panel, row);
                break;
            case GgmlType::Q8_0:
                fill_row_q8_0(w_row, panel.n_blocks, panel, row);
                break;
            case GgmlType::Q4_K:
                fill_row_q4_k(w_row, panel.n_blocks, panel, row);
                break;
            case GgmlType::Q6_K:
                fill_row_q6_k(w_row, panel.n_blocks, panel, row);
                break;
            default:
                fill_row_generic(w.type, w_row, panel, row);
                break;
        }
    }
}

std::size_t float_panel_bytes(int64_t n_cols) {
    return align64(static_cast<std::size_t>(n_cols) * kPanelRows * sizeof(float));
}

void fill_float_panel(const WeightMatrix& w, int64_t row_begin, int64_t col_begin, int64_t n_cols,
                      float* panel, int64_t prefetch_delta) {
    if (fill_float_panel_simd(w, row_begin, col_begin, n_cols, panel, prefetch_delta)) return;
    const std::size_t w_row_bytes = row_size(w.type, w.n_cols);
    const std::size_t skip = row_size(w.type, col_begin);
    for (int row = 0; row < kPanelRows; ++row) {
        const int64_t r = row_begin + row;
        if (r >= w.n_rows) {
            for (int64_t k = 0; k < n_cols; ++k) panel[k * kPanelRows + row] = 0.0f;
            continue;
        }
        const std::byte* w_row = w.data.data() + static_cast<std::size_t>(r) * w_row_bytes + skip;
        if (w.type == GgmlType::F32) {
            const auto* src = reinterpret_cast<const float*>(w_row);
            for (int64_t k = 0; k < n_cols; ++k) panel[k * kPanelRows + row] = src[k];
        } else {
            const auto* src = reinterpret_cast<const uint16_t*>(w_row);
            const bool is_f16 = w.type == GgmlType::F16;
            for (int64_t k = 0; k < n_cols; ++k) {
                panel[k * kPanelRows + row] = is_f16 ? f16_to_f32(src[k]) : bf16_to_f32(src[k]);
            }
        }
    }
}

}  // namespace minfer::kernels
