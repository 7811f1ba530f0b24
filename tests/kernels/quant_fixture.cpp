#include "quant_fixture.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/packed_layout.h"

namespace minfer::test {

const std::vector<GgmlType>& matmul_types() {
    static const std::vector<GgmlType> types = {
        GgmlType::F32,   GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,   GgmlType::Q4_1,
        GgmlType::Q5_0,  GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,   GgmlType::Q3_K,
        GgmlType::Q4_K,  GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
        GgmlType::TQ1_0, GgmlType::TQ2_0};
    return types;
}

void TestMatrix::pack() {
    const kernels::PackedLayout layout = kernels::packed_layout(type, n_cols, n_rows);
    packed.assign((layout.bytes() + 63) / 64, Line{});
    kernels::repack_groups(view(), 0, layout.n_groups, packed.front().bytes);
}

WeightMatrix TestMatrix::packed_view() const {
    WeightMatrix w = view();
    w.packed = std::span<const std::byte>(packed.front().bytes, packed.size() * sizeof(Line));
    return w;
}

QuantFixture::QuantFixture(const std::string& path) : file_(GgufFile::open(path)) {}

TestMatrix QuantFixture::make_matrix(GgmlType type, int64_t n_rows, int64_t n_cols) const {
    // Segments of one block (32 values for the float and 32-block types, 256 for the K-quants).
    const int64_t kSegment = std::max<int64_t>(32, block_size(type));
    const TensorInfo& src = file_.tensor("src");
    const int64_t fixture_cols = src.ne[0];
    const int64_t fixture_rows = src.ne[1];
    const int64_t segments_per_row = fixture_cols / kSegment;

    TestMatrix m;
    m.type = type;
    m.n_cols = n_cols;
    m.n_rows = n_rows;
    const std::size_t seg_bytes = row_size(type, kSegment);
    const std::size_t fixture_row_bytes = row_size(type, fixture_cols);
    m.bytes.resize(row_size(type, n_cols) * static_cast<std::size_t>(n_rows));
    m.values.resize(static_cast<std::size_t>(n_rows * n_cols));

    // F32 weights are the source rows themselves (ggml's "dequantization" is the identity).
    const std::string name(type_name(type));
    const TensorInfo& q = type == GgmlType::F32 ? src : file_.tensor("q." + name);
    const TensorInfo& deq = type == GgmlType::F32 ? src : file_.tensor("deq." + name);

    std::byte* out = m.bytes.data();
    for (int64_t r = 0; r < n_rows; ++r) {
        for (int64_t s = 0; s < n_cols / kSegment; ++s) {
            const int64_t fixture_row = (r * 7 + s * 3) % fixture_rows;
            const int64_t fixture_seg = (r + s) % segments_per_row;
            std::memcpy(out,
                        q.data.data() + fixture_row * fixture_row_bytes + fixture_seg * seg_bytes,
                        seg_bytes);
            out += seg_bytes;
            std::memcpy(&m.values[static_cast<std::size_t>(r * n_cols + s * kSegment)],
                        deq.data.data() +
                            (fixture_row * fixture_cols + fixture_seg * kSegment) * sizeof(float),
                        kSegment * sizeof(float));
        }
    }
    return m;
}

}  // namespace minfer::test
