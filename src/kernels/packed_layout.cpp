// The interleaved weight layout (packed_layout.h), built once at load: a word-by-word
// transposition of 16 rows, the fifth bits of Q5_0, Q5_1 and Q5_K as bit planes, Q6_K's 6-bit codes
// four to three bytes.

#include "kernels/packed_layout.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace minfer::kernels {
namespace {

constexpr int64_t align64(int64_t n) {
    return (n + 63) & ~int64_t{63};
}

uint32_t load32(const uint8_t* p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}

// Row r's n_words words of a block from byte `offset` on, into units of the 16 rows' copies.
void put_words(const uint8_t* block, int r, int offset, int n_words, uint8_t* dst,
               uint32_t flip = 0) {
    for (int w = 0; w < n_words; ++w) {
        const uint32_t v = load32(block + offset + 4 * w) ^ flip;
        std::memcpy(dst + 64 * w + 4 * r, &v, 4);
    }
}

// Row r's fifth bits of one 32-value run as a bit plane (packed_layout.h): byte 4r + c of the unit
// at dst gets in bit g the fifth bit of column 4g + c, fifth_bit(column).
template <class FifthBit>
void put_plane(int r, uint8_t* dst, FifthBit fifth_bit) {
    for (int c = 0; c < 4; ++c) {
        uint8_t byte = 0;
        for (int g = 0; g < 8; ++g) byte |= static_cast<uint8_t>((fifth_bit(4 * g + c) & 1) << g);
        dst[4 * r + c] = byte;
    }
}

// Q5_0 and Q5_1: the 4 words of qs, then a plane of qh, whose bit c is the fifth bit of value c
// (Q5_0: qh at bytes 2-5, qs at 6; Q5_1: 4-7 and 8).
void pack_q5(const uint8_t* block, int qh_offset, int r, uint8_t* a) {
    put_words(block, r, qh_offset + 4, 4, a);
    const uint32_t qh = load32(block + qh_offset);
    put_plane(r, a + 4 * 64, [qh](int column) { return qh >> column; });
}

// Q5_K: bit s of qh[l] (bytes 16-47) is the fifth bit of value l of sub-block s. Per pair of
// sub-blocks 2q, 2q + 1 (units 4 + 10q ..): their two planes, then the 8 words of qs that hold
// both (bytes 48 + 32q ..).
void pack_q5_k(const uint8_t* block, int r, uint8_t* a) {
    put_words(block, r, 0, 4, a);
    for (int s = 0; s < 8; ++s) {
        put_plane(r, a + 64 * (4 + 10 * (s / 2) + s % 2),
                  [block, s](int column) { return block[16 + column] >> s; });
    }
    for (int q = 0; q < 4; ++q) put_words(block, r, 48 + 32 * q, 8, a + 64 * (6 + 10 * q));
}

// Q6_K: the 16 int8 scales (bytes 192-207) as 4 words, then sub-block k (16 values: column
// groups 4k .. 4k + 3, codes G0-G3 of 6 bits) in units 4 + 3k .. 4 + 3k + 2: G0 | (G3 & 3) << 6,
// G1 | (G3 & 12) << 4, G2 | (G3 & 48) << 2. The scales come first because the kernel needs them
// first (the stream is read in order).
void pack_q6_k(const uint8_t* block, int r, uint8_t* a) {
    put_words(block, r, 192, 4, a);
    // The codes (value + 32, 0-63) as block_unpack decodes them: in each half of 128 values,
    // columns l, l + 32, l + 64, l + 96 take the low nibble of ql[l], of ql[l + 32], the high
    // nibble of ql[l], of ql[l + 32], with bits 0-1, 2-3, 4-5, 6-7 of qh[l] on top.
    uint8_t codes[256];
    for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = block + 64 * half;
        const uint8_t* qh = block + 128 + 32 * half;
        uint8_t* q = codes + 128 * half;
        for (int l = 0; l < 32; ++l) {
            q[l] = static_cast<uint8_t>((ql[l] & 0x0F) | (qh[l] & 3) << 4);
            q[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0F) | (qh[l] >> 2 & 3) << 4);
            q[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (qh[l] >> 4 & 3) << 4);
            q[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4);
        }
    }
    for (int k = 0; k < 16; ++k) {
        for (int c = 0; c < 4; ++c) {
            const uint8_t* g = codes + 16 * k + c;  // g[4 i]: group i's value
            for (int i = 0; i < 3; ++i) {
                a[64 * (4 + 3 * k + i) + 4 * r + c] =
                    static_cast<uint8_t>(g[4 * i] | ((g[12] >> (2 * i)) & 3) << 6);
            }
        }
    }
}

struct TypeLayout {
    int64_t a_bytes;  // per block (a column of float weights)
    int d_offset;     // offset in the file's block of the f16 d that goes to the d units, -1: none
};

bool type_layout(GgmlType type, TypeLayout& t) {
    switch (type) {
        case GgmlType::Q4_0:
        case GgmlType::IQ4_NL:
            t = {64 * 4, 0};
            return true;
        case GgmlType::Q4_1:
            t = {64 * 5, -1};
            return true;
        case GgmlType::Q5_0:
            t = {64 * 5, 0};
            return true;
        case GgmlType::Q5_1:
            t = {64 * 6, -1};
            return true;
        case GgmlType::Q8_0:
            t = {64 * 8, 0};
            return true;
        case GgmlType::Q4_K:
            t = {64 * 36, -1};
            return true;
        case GgmlType::Q5_K:
            t = {64 * 44, -1};
            return true;
        case GgmlType::Q6_K:
            t = {64 * 52, 208};
            return true;
        case GgmlType::IQ4_XS:
            t = {64 * 34, -1};
            return true;
        case GgmlType::F32:
            t = {kPackedRows * 4, -1};
            return true;
        case GgmlType::F16:
        case GgmlType::BF16:
            t = {kPackedRows * 2, -1};
            return true;
        default:
            return false;
    }
}

// Group g of float weights (elements of `Elem`): row r of column b at element r of
// float_column_offset(g, k, b); rows past the end zero.
template <class Elem>
void put_float_group(const WeightMatrix& w, const PackedLayout& l, int64_t g, std::byte* packed) {
    const auto* data = reinterpret_cast<const Elem*>(w.data.data());
    const auto elem = static_cast<int64_t>(sizeof(Elem));
    for (int64_t k = 0; k < l.n_stripes(); ++k) {
        const int64_t b0 = l.stripe_begin(k), nb = l.stripe_size(k);
        auto* first = reinterpret_cast<Elem*>(packed + l.float_column_offset(g, k, 0, elem));
        const int64_t stride = l.float_column_stride(g);
        // Row after row, so that each row's columns are read in order.
        for (int r = 0; r < kPackedRows; ++r) {
            const int64_t row = g * kPackedRows + r;
            const Elem* src = row < w.n_rows ? data + row * w.n_cols + b0 : nullptr;
            for (int64_t b = 0; b < nb; ++b) first[b * stride + r] = src ? src[b] : Elem{0};
        }
    }
}

// Row r's part of the codes of one block.
void pack_block(GgmlType type, const uint8_t* block, int r, uint8_t* a) {
    switch (type) {
        case GgmlType::Q4_0:
        case GgmlType::IQ4_NL:
            return put_words(block, r, 2, 4, a);
        case GgmlType::Q8_0:
            return put_words(block, r, 2, 8, a, 0x80808080u);
        case GgmlType::Q4_1:  // d | m, then qs
            return put_words(block, r, 0, 5, a);
        case GgmlType::Q5_0:
            return pack_q5(block, 2, r, a);
        case GgmlType::Q5_1:  // d | m, then Q5_0's units
            put_words(block, r, 0, 1, a);
            return pack_q5(block, 4, r, a + 64);
        case GgmlType::Q4_K:
            return put_words(block, r, 0, 36, a);
        case GgmlType::Q5_K:
            return pack_q5_k(block, r, a);
        case GgmlType::Q6_K:
            return pack_q6_k(block, r, a);
        case GgmlType::IQ4_XS:
            return put_words(block, r, 0, 34, a);
        default:
            throw UnsupportedError(
                concat("no interleaved layout for weights of type ", type_name(type)));
    }
}

}  // namespace

bool has_packed_layout(GgmlType type) {
    TypeLayout t{};
    return type_layout(type, t);
}

PackedLayout packed_layout(GgmlType type, int64_t n_cols, int64_t n_rows) {
    TypeLayout t{};
    if (!type_layout(type, t)) {
        throw UnsupportedError(
            concat("no interleaved layout for weights of type ", type_name(type)));
    }
    PackedLayout l;
    l.n_blocks = n_cols / block_size(type);
    l.n_groups = (n_rows + kPackedRows - 1) / kPackedRows;
    l.a_bytes = t.a_bytes;
    l.has_d_units = t.d_offset >= 0;
    int64_t fit = is_float_type(type) ? kFloatStripeColumns
                                 : std::max<int64_t>(1, kStripeBytes /
                                                            (l.a_bytes + (l.has_d_units ? 32 : 0)));
    if (l.has_d_units) fit = std::max<int64_t>(2, fit & ~int64_t{1});  // whole pairs of blocks
    l.stripe_blocks = std::max<int64_t>(1, std::min(l.n_blocks, fit));
    l.group_bytes = l.n_blocks * l.a_bytes + (l.has_d_units ? align64(l.n_blocks * 32) : 0);
    l.band_groups = std::max<int64_t>(1, kBandBytes / l.chunk_bytes(l.stripe_blocks));
    return l;
}

void repack_groups(const WeightMatrix& w, int64_t group_begin, int64_t group_end,
                   std::byte* packed) {
    const PackedLayout l = packed_layout(w.type, w.n_cols, w.n_rows);
    TypeLayout t{};
    type_layout(w.type, t);
    const auto row_bytes = static_cast<int64_t>(row_size(w.type, w.n_cols));
    const auto block_bytes = static_cast<int64_t>(type_size(w.type));
    const auto* data = reinterpret_cast<const uint8_t*>(w.data.data());
    for (int64_t g = group_begin; g < group_end; ++g) {
        if (w.type == GgmlType::F32) {
            put_float_group<uint32_t>(w, l, g, packed);
            continue;
        }
        if (is_float_type(w.type)) {
            put_float_group<uint16_t>(w, l, g, packed);
            continue;
        }
        for (int64_t k = 0; k < l.n_stripes(); ++k) {
            auto* chunk = reinterpret_cast<uint8_t*>(packed) + l.chunk_offset(g, k);
            const int64_t b0 = l.stripe_begin(k), nb = l.stripe_size(k);
            // Rows past the end stay zero (d = 0: they add nothing), as does the last d unit's
            // padding.
            std::memset(chunk, 0, static_cast<std::size_t>(l.chunk_bytes(nb)));
            // Row after row, so that each row's blocks are read in order.
            for (int r = 0; r < kPackedRows; ++r) {
                const int64_t row = g * kPackedRows + r;
                if (row >= w.n_rows) break;
                const uint8_t* src = data + row * row_bytes + b0 * block_bytes;
                for (int64_t b = 0; b < nb; ++b) {
                    const uint8_t* block = src + b * block_bytes;
                    pack_block(w.type, block, r, chunk + l.a_offset(b));
                    if (l.has_d_units)
                        std::memcpy(chunk + l.d_offset(b) + 2 * r, block + t.d_offset, 2);
                }
            }
        }
    }
}

}  // namespace minfer::kernels
