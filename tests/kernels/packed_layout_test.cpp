// The interleaved layout (kernels/packed_layout.h) read back by a scalar decoder written from the
// header's description, against the file's blocks decoded by block_unpack (the common decoder the
// scalar reference dots use): every value of every row of every type, row counts that leave the
// last group partial (its padding rows must be zero), and the sizes the header promises (the same
// bytes as the file, plus at most 32 bytes of padding per group).

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>

#include "common/fixtures.h"
#include "core/error.h"
#include "core/half.h"
#include "core/thread_pool.h"
#include "kernels/block_unpack.h"
#include "kernels/matmul.h"
#include "kernels/packed_layout.h"
#include "quant/block_types.h"
#include "quant_fixture.h"

namespace minfer {
namespace {

using kernels::kPackedRows;
using kernels::PackedLayout;

// The quantized types with an interleaved layout (float_types() have one too, of columns).
const std::vector<GgmlType>& packed_types() {
    static const std::vector<GgmlType> types = {
        GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,  GgmlType::Q8_0,
        GgmlType::IQ4_NL, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS};
    return types;
}

const std::vector<GgmlType>& float_types() {
    static const std::vector<GgmlType> types = {GgmlType::F32, GgmlType::F16, GgmlType::BF16};
    return types;
}

// Reads the packed copy of one row group, as the header describes it.
struct PackedReader {
    GgmlType type;
    PackedLayout layout;
    const uint8_t* matrix;  // the whole packed matrix
    int64_t group;          // the row group

    // Types with d units: per pair of blocks, the d unit, then the codes of both blocks.
    int64_t pair_bytes() const { return 64 + 2 * layout.a_bytes; }
    // One group's chunk of a stripe of nb blocks: the codes, and a d unit per pair of blocks.
    int64_t chunk_bytes(int64_t nb) const {
        return nb * layout.a_bytes + (layout.has_d_units ? 64 * ((nb + 1) / 2) : 0);
    }
    // Band after band (band_groups groups, fewer in the last), each holding stripe after stripe,
    // each stripe every one of the band's groups' chunks in turn.
    const uint8_t* chunk(int64_t block) const {
        auto stripe_size = [&](int64_t k) {
            return std::min(layout.stripe_blocks, layout.n_blocks - k * layout.stripe_blocks);
        };
        int64_t all_stripes = 0;  // one group's chunks of every stripe
        for (int64_t k = 0; k * layout.stripe_blocks < layout.n_blocks; ++k)
            all_stripes += chunk_bytes(stripe_size(k));
        const int64_t first = group / layout.band_groups * layout.band_groups;
        const int64_t in_band = std::min(layout.band_groups, layout.n_groups - first);
        const int64_t k = block / layout.stripe_blocks;
        return matrix + first * all_stripes + k * in_band * chunk_bytes(layout.stripe_blocks) +
               (group - first) * chunk_bytes(stripe_size(k));
    }
    const uint8_t* codes(int64_t block) const {
        const int64_t local = block % layout.stripe_blocks;  // in its chunk
        if (!layout.has_d_units) return chunk(block) + local * layout.a_bytes;
        return chunk(block) + (local / 2) * pair_bytes() + 64 + (local % 2) * layout.a_bytes;
    }
    const uint8_t* unit(int64_t block, int u) const { return codes(block) + 64 * u; }
    // Byte k (0-3) of row r's copy of word unit u.
    uint8_t word_byte(int64_t block, int u, int r, int k) const {
        return unit(block, u)[4 * r + k];
    }
    // Bit g of byte 4r + c of the bit plane at unit u: the fifth bit of row r's column c of
    // column group g.
    int plane_bit(int64_t block, int u, int g, int r, int c) const {
        return (word_byte(block, u, r, c) >> g) & 1;
    }
    // Row r's 4 bytes of unit u (a word or a bit plane): all zero?
    bool row_is_zero(int64_t block, int u, int r) const {
        for (int k = 0; k < 4; ++k) {
            if (word_byte(block, u, r, k) != 0) return false;
        }
        return true;
    }
    uint16_t d_unit(int64_t block, int r) const {
        uint16_t d;
        const int64_t local = block % layout.stripe_blocks;
        std::memcpy(&d, chunk(block) + (local / 2) * pair_bytes() + 32 * (local % 2) + 2 * r, 2);
        return d;
    }

    // The integer value (as block_unpack's q) of column `col` of block `block`, row r.
    int value(int64_t block, int r, int col) const {
        const int c = col % 4;
        auto nibble = [&](int u, int k, bool high) {
            const uint8_t byte = word_byte(block, u, r, k);
            return high ? byte >> 4 : byte & 0x0F;
        };
        switch (type) {
            case GgmlType::Q4_0:
            case GgmlType::IQ4_NL: {
                const int g = col / 4;
                const int n = nibble(g % 4, c, g >= 4);
                return type == GgmlType::Q4_0 ? n - 8 : kvalues_iq4nl[n];
            }
            case GgmlType::Q4_1: {  // after the d | m word
                const int g = col / 4;
                return nibble(1 + g % 4, c, g >= 4);
            }
            case GgmlType::Q8_0:
                return static_cast<int8_t>(word_byte(block, col / 4, r, c) ^ 0x80);
            case GgmlType::Q5_0:
            case GgmlType::Q5_1: {  // Q5_1: after the d | m word
                const int g = col / 4, first = type == GgmlType::Q5_1 ? 1 : 0;
                const int code =
                    nibble(first + g % 4, c, g >= 4) | plane_bit(block, first + 4, g, r, c) << 4;
                return type == GgmlType::Q5_1 ? code : code - 16;
            }
            case GgmlType::Q4_K:
            case GgmlType::Q5_K: {
                const int s = col / 32, j = col % 32 / 4;
                if (type == GgmlType::Q4_K) return nibble(4 + 8 * (s / 2) + j, c, s % 2 == 1);
                const int pair = 4 + 10 * (s / 2);  // the pair's planes, then its words
                return nibble(pair + 2 + j, c, s % 2 == 1) |
                       plane_bit(block, pair + s % 2, j, r, c) << 4;
            }
            case GgmlType::Q6_K: {
                const int k = col / 16, i = col % 16 / 4;
                if (i < 3) return (word_byte(block, 4 + 3 * k + i, r, c) & 0x3F) - 32;
                int code = 0;
                for (int u = 0; u < 3; ++u)
                    code |= (word_byte(block, 4 + 3 * k + u, r, c) >> 6) << 2 * u;
                return code - 32;
            }
            case GgmlType::IQ4_XS: {
                const int s = col / 32, idx = col % 32;
                return kvalues_iq4nl[nibble(2 + 4 * s + idx % 16 / 4, c, idx >= 16)];
            }
            default:
                throw UsageError("not a packed type");
        }
    }

    // The block's header bytes as the file holds them: d (f16) and, for the K-quants, what
    // follows it up to the quants (the scales), read from the d units or the header's word units.
    std::vector<uint8_t> header(int64_t block, int r) const {
        std::vector<uint8_t> out;
        auto words = [&](int first, int n) {
            for (int u = first; u < first + n; ++u)
                for (int k = 0; k < 4; ++k) out.push_back(word_byte(block, u, r, k));
        };
        switch (type) {
            case GgmlType::Q4_K:
            case GgmlType::Q5_K:
                words(0, 4);  // d, dmin, scales[12]
                break;
            case GgmlType::IQ4_XS:
                words(0, 2);  // d, scales_h, scales_l[4]
                break;
            case GgmlType::Q4_1:
            case GgmlType::Q5_1:
                words(0, 1);  // d, m
                break;
            case GgmlType::Q6_K:
                words(0, 4);  // scales[16]
                [[fallthrough]];
            default: {
                const uint16_t d = d_unit(block, r);
                out.push_back(static_cast<uint8_t>(d & 0xFF));
                out.push_back(static_cast<uint8_t>(d >> 8));
            }
        }
        return out;
    }
};

// The same header bytes from the file's block.
std::vector<uint8_t> file_header(GgmlType type, const std::byte* block) {
    const auto* b = reinterpret_cast<const uint8_t*>(block);
    switch (type) {
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
            return {b, b + 16};
        case GgmlType::IQ4_XS:
            return {b, b + 8};
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:
            return {b, b + 4};
        case GgmlType::Q6_K: {
            std::vector<uint8_t> out(b + 192, b + 208);
            out.insert(out.end(), b + 208, b + 210);
            return out;
        }
        default:
            return {b, b + 2};
    }
}

class PackedLayoutTest : public testing::TestWithParam<GgmlType> {};

TEST_P(PackedLayoutTest, HoldsEveryValueWhereTheHeaderSays) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const test::QuantFixture fixture(path.string());
    const GgmlType type = GetParam();
    for (int64_t rows : {1, 16, 21, 37, 149}) {
        // 768 and 1280 columns: an odd number of K-quant blocks; 800: of 32-value blocks; 4000
        // and 2816: several stripes, the last one shorter, with an odd number of blocks, and
        // with 149 rows (10 groups) several bands, the last one shorter.
        const bool small_blocks = block_size(type) == 32;
        for (int64_t cols :
             {int64_t{256}, int64_t{768}, small_blocks ? int64_t{800} : int64_t{1280},
              small_blocks ? int64_t{4000} : int64_t{2816}}) {
            SCOPED_TRACE(testing::Message() << type_name(type) << " " << rows << " x " << cols);
            test::TestMatrix m = fixture.make_matrix(type, rows, cols);
            m.pack();
            const PackedLayout l = kernels::packed_layout(type, cols, rows);
            // The file's bytes: 16 rows of blocks per group, plus the last d unit's padding.
            const auto block_bytes = static_cast<int64_t>(type_size(type));
            EXPECT_EQ(l.a_bytes + (l.has_d_units ? 32 : 0), kPackedRows * block_bytes);
            EXPECT_LE(l.group_bytes - kPackedRows * static_cast<int64_t>(row_size(type, cols)), 32);
            EXPECT_EQ(l.n_groups, (rows + kPackedRows - 1) / kPackedRows);
            // Stripes of at most kStripeBytes per group (but a pair of blocks), whole pairs of
            // blocks but the last, and every chunk within the matrix's bytes.
            const auto* packed = reinterpret_cast<const uint8_t*>(m.packed.front().bytes);
            const PackedReader last{type, l, packed, l.n_groups - 1};
            EXPECT_LE(last.chunk_bytes(l.stripe_blocks),
                      std::max(kernels::kStripeBytes, last.chunk_bytes(2)));
            if (l.has_d_units && l.stripe_blocks < l.n_blocks) {
                EXPECT_EQ(l.stripe_blocks % 2, 0);
            }
            EXPECT_EQ(last.chunk(l.n_blocks - 1) +
                          last.chunk_bytes((l.n_blocks - 1) % l.stripe_blocks + 1),
                      packed + l.bytes());
            // Bands of at most kBandBytes per stripe (but one group).
            EXPECT_LE(l.band_groups * last.chunk_bytes(l.stripe_blocks),
                      std::max(kernels::kBandBytes, last.chunk_bytes(l.stripe_blocks)));
            EXPECT_GT(2 * l.band_groups * last.chunk_bytes(l.stripe_blocks), kernels::kBandBytes);
            if (cols == (small_blocks ? 4000 : 2816)) {
                EXPECT_GT(l.n_stripes(), 1);
                if (rows == 149) {
                    EXPECT_GT(l.n_bands(), 2);
                    EXPECT_NE(l.n_groups % l.band_groups, 0);
                }
            }
            for (int64_t g = 0; g < l.n_groups; ++g) {
                const PackedReader reader{type, l, packed, g};
                for (int r = 0; r < kPackedRows; ++r) {
                    const int64_t row = g * kPackedRows + r;
                    for (int64_t b = 0; b < l.n_blocks; ++b) {
                        if (row >= rows) {  // padding: all zero, so d = 0
                            for (int u = 0; u < l.a_bytes / 64; ++u) {
                                ASSERT_TRUE(reader.row_is_zero(b, u, r))
                                    << "row " << row << " unit " << u;
                            }
                            if (l.has_d_units) {
                                ASSERT_EQ(reader.d_unit(b, r), 0);
                            }
                            continue;
                        }
                        const std::byte* block = m.bytes.data() +
                                                 row * static_cast<int64_t>(row_size(type, cols)) +
                                                 b * block_bytes;
                        UnpackedBlock expected;
                        unpack_block(type, block, expected);
                        const int values = static_cast<int>(block_size(type));
                        for (int col = 0; col < values; ++col) {
                            ASSERT_EQ(reader.value(b, r, col), expected.q[col])
                                << "row " << row << " block " << b << " column " << col;
                        }
                        ASSERT_EQ(reader.header(b, r), file_header(type, block))
                            << "row " << row << " block " << b;
                    }
                }
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, PackedLayoutTest, testing::ValuesIn(packed_types()),
                         [](const auto& param_info) {
                             return std::string(type_name(param_info.param));
                         });

// Float weights: a block is one column, its 16 rows' values copied as they are (any bits); the
// chunks of a stripe of each quad (4 groups from the band's first, fewer at its end) hold column
// 0 of the quad's groups, then column 1, ...; rows past the end zero.
TEST(PackedLayout, FloatWeightsColumnByColumn) {
    std::mt19937 rng(5);
    for (GgmlType type : float_types()) {
        const auto elem = static_cast<int64_t>(type_size(type));
        for (int64_t rows : {1, 16, 37, 149}) {
            // 300: a shorter last stripe; 2816 with 149 rows: several stripes and bands, the
            // last band shorter; 224 (F16/BF16: bands of 9 groups): a quad of one group ending
            // a band that is not the last
            for (int64_t cols : {37, 224, 256, 300, 2816}) {
                SCOPED_TRACE(testing::Message() << type_name(type) << " " << rows << " x " << cols);
                const auto row_bytes = static_cast<int64_t>(row_size(type, cols));
                test::TestMatrix m{type, cols, rows, {}, {}, {}};
                m.bytes.resize(static_cast<std::size_t>(rows * row_bytes));
                for (std::byte& b : m.bytes) b = static_cast<std::byte>(rng() & 0xFF);
                m.pack();
                const PackedLayout l = kernels::packed_layout(type, cols, rows);
                EXPECT_EQ(l.n_blocks, cols);
                EXPECT_EQ(l.a_bytes, kPackedRows * elem);
                EXPECT_FALSE(l.has_d_units);
                EXPECT_EQ(l.stripe_blocks, std::min<int64_t>(cols, kernels::kFloatStripeColumns));
                EXPECT_EQ(l.group_bytes, kPackedRows * row_bytes);
                EXPECT_LE(l.band_groups * l.chunk_bytes(l.stripe_blocks),
                          std::max(kernels::kBandBytes, l.chunk_bytes(l.stripe_blocks)));
                if (rows == 149 && cols == 2816) {
                    EXPECT_GT(l.n_stripes(), 1);
                    EXPECT_GE(l.n_bands(), 2);
                    EXPECT_NE(l.n_groups % l.band_groups, 0);
                }
                const auto* packed = reinterpret_cast<const uint8_t*>(m.packed.front().bytes);
                const auto* file = reinterpret_cast<const uint8_t*>(m.bytes.data());
                const uint8_t zero[4] = {};
                for (int64_t g = 0; g < l.n_groups; ++g) {
                    const int64_t first = g / l.band_groups * l.band_groups;
                    const int64_t band_end = std::min(l.n_groups, first + l.band_groups);
                    const int64_t q0 = first + (g - first) / 4 * 4;
                    const int64_t q = std::min<int64_t>(4, band_end - q0);
                    const PackedReader quad{type, l, packed, q0};
                    for (int r = 0; r < kPackedRows; ++r) {
                        const int64_t row = g * kPackedRows + r;
                        for (int64_t col = 0; col < cols; ++col) {
                            const int64_t b = col % l.stripe_blocks;  // in its stripe
                            const uint8_t* at = quad.chunk(col) +
                                                ((b * q + g - q0) * kPackedRows + r) * elem;
                            const uint8_t* expected =
                                row < rows ? file + row * row_bytes + col * elem : zero;
                            ASSERT_EQ(std::memcmp(at, expected, static_cast<std::size_t>(elem)), 0)
                                << "row " << row << " column " << col;
                        }
                    }
                }
            }
        }
    }
}

TEST(PackedLayout, OnlyTheInterleavedTypesHaveOne) {
    for (GgmlType type : test::matmul_types()) {
        const bool expected =
            std::find(packed_types().begin(), packed_types().end(), type) != packed_types().end() ||
            std::find(float_types().begin(), float_types().end(), type) != float_types().end();
        EXPECT_EQ(kernels::has_packed_layout(type), expected) << type_name(type);
        if (!expected) {
            EXPECT_THROW(kernels::packed_layout(type, 256, 16), UnsupportedError);
        }
    }
}

TEST(PackedLayout, MatmulRefusesABadCopy) {
    MINFER_REQUIRE_FIXTURE(path, "quant/quant-fixtures.gguf");
    const test::QuantFixture fixture(path.string());
    test::TestMatrix m = fixture.make_matrix(GgmlType::Q4_0, 20, 256);
    m.pack();
    ThreadPool pool(1);
    MatmulScratch scratch;
    std::vector<float> x(256, 1.0f), y(20);
    WeightMatrix w = m.packed_view();
    EXPECT_NO_THROW(matmul(w, x.data(), 1, y.data(), pool, scratch));
    w.packed = w.packed.first(w.packed.size() - 64);  // one unit short
    EXPECT_THROW(matmul(w, x.data(), 1, y.data(), pool, scratch), UsageError);
    w = m.packed_view();
    w.packed = w.packed.subspan(4);  // not on a 64-byte boundary
    EXPECT_THROW(matmul(w, x.data(), 1, y.data(), pool, scratch), UsageError);
    w = m.view();
    w.type = GgmlType::Q2_K;  // no interleaved layout: a copy of it cannot be right
                              // (20 rows of 256 Q2_K values fit in the Q4_0 bytes)
    w.packed = m.packed_view().packed;
    EXPECT_THROW(matmul(w, x.data(), 1, y.data(), pool, scratch), UsageError);
}

}  // namespace
}  // namespace minfer
