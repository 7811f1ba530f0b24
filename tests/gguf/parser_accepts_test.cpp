// Edge cases that must load, and the facts the parser derives (strides, offsets, views).

#include <gtest/gtest.h>

#include "common/byte_builder.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace minfer {
namespace {

using test::ByteBuilder;

TEST(GgufAccepts, Version2) {
    ByteBuilder b;
    b.header(2, 0, 1).str("general.name").u32(8).str("old");
    const GgufFile f = GgufFile::from_bytes(b.bytes(), "v2.gguf");
    EXPECT_EQ(f.first_part().version, 2u);
    EXPECT_EQ(f.metadata().get_string("general.name"), "old");
}

TEST(GgufAccepts, NoMetadataAndNoTensors) {
    ByteBuilder b;
    b.header(3, 0, 0);
    const GgufFile f = GgufFile::from_bytes(b.bytes(), "empty.gguf");
    EXPECT_TRUE(f.metadata().empty());
    EXPECT_TRUE(f.tensors().empty());
    EXPECT_EQ(f.first_part().data_offset, 24u);
}

TEST(GgufAccepts, ZeroTensorsWithMetadata) {
    GgufWriter w;
    w.metadata().set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    const auto bytes = w.to_bytes();
    const GgufFile f = GgufFile::from_bytes(bytes, "vocab-only.gguf");
    EXPECT_EQ(f.tensors().size(), 0u);
    EXPECT_EQ(f.metadata().get_string("tokenizer.ggml.model"), "gpt2");
}

TEST(GgufAccepts, Alignment64PadsEveryTensor) {
    GgufWriter w;
    w.set_alignment(64);
    std::vector<float> a(3, 1.0f), b(5, 2.0f);
    w.add_tensor("a", GgmlType::F32, {3}, std::as_bytes(std::span(a)));
    w.add_tensor("b", GgmlType::F32, {5}, std::as_bytes(std::span(b)));
    const auto bytes = w.to_bytes();
    const GgufFile f = GgufFile::from_bytes(bytes, "align64.gguf");
    EXPECT_EQ(f.first_part().alignment, 64u);
    EXPECT_EQ(f.first_part().data_offset % 64, 0u);
    EXPECT_EQ(f.tensor("b").offset, 64u);
    EXPECT_EQ(f.first_part().data_size, 128u);
    float second;
    std::memcpy(&second, f.tensor("b").data.data(), 4);
    EXPECT_EQ(second, 2.0f);
}

TEST(GgufAccepts, TrailingBytesAfterTheDataSection) {
    GgufWriter w;
    std::vector<float> a(8, 0.5f);
    w.add_tensor("a", GgmlType::F32, {8}, std::as_bytes(std::span(a)));
    auto bytes = w.to_bytes();
    bytes.resize(bytes.size() + 1000, std::byte{0xAB});
    const GgufFile f = GgufFile::from_bytes(bytes, "trailing.gguf");
    EXPECT_EQ(f.tensor("a").n_bytes, 32u);
}

TEST(GgufAccepts, LastTensorWithoutItsTrailingPadding) {
    // The data a tensor needs must be present; the padding after the last one need not be.
    ByteBuilder b;
    b.header(3, 1, 0).str("w").u32(1).i64(3).u32(0).u64(0).pad_to(32).zeros(12);
    const GgufFile f = GgufFile::from_bytes(b.bytes(), "nopad.gguf");
    EXPECT_EQ(f.tensor("w").n_bytes, 12u);
}

TEST(GgufAccepts, StridesAsGgmlComputesThem) {
    GgufWriter w;
    std::vector<std::byte> q4(18 * 4 * 3 * 2);
    w.add_tensor("q", GgmlType::Q4_0, {128, 3, 2}, q4);
    const auto bytes = w.to_bytes();
    const GgufFile f = GgufFile::from_bytes(bytes, "strides.gguf");
    const TensorInfo& t = f.tensor("q");
    EXPECT_EQ(t.n_dims, 3u);
    EXPECT_EQ(t.nb[0], 18u);
    EXPECT_EQ(t.nb[1], 18u * 4);
    EXPECT_EQ(t.nb[2], 18u * 4 * 3);
    EXPECT_EQ(t.nb[3], 18u * 4 * 3 * 2);
    EXPECT_EQ(t.n_elements(), 128 * 3 * 2);
    EXPECT_EQ(t.shape_string(), "[128, 3, 2]");
}

TEST(GgufAccepts, ZeroSizedTensorAndScalarTensor) {
    ByteBuilder b;
    b.header(3, 2, 0);
    b.str("empty").u32(2).i64(0).i64(7).u32(0).u64(0);
    b.str("scalar").u32(0).u32(0).u64(0);  // n_dims 0: one f32 element
    b.pad_to(32).zeros(4);
    const GgufFile f = GgufFile::from_bytes(b.bytes(), "edge.gguf");
    EXPECT_EQ(f.tensor("empty").n_bytes, 0u);
    EXPECT_EQ(f.tensor("scalar").n_elements(), 1);
    EXPECT_EQ(f.tensor("scalar").n_bytes, 4u);
}

TEST(GgufAccepts, NestedArrays) {
    ByteBuilder b;
    // [[1, 2], [3]] as arrays of u32
    b.header(3, 0, 1).str("nested").u32(9).u32(9).u64(2);
    b.u32(4).u64(2).u32(1).u32(2);
    b.u32(4).u64(1).u32(3);
    const GgufFile f = GgufFile::from_bytes(b.bytes(), "nested.gguf");
    const GgufArray& outer = f.metadata().get_array("nested");
    ASSERT_EQ(outer.size(), 2u);
    EXPECT_EQ(outer.arrays()[0].as_array().to_vector<uint32_t>(), (std::vector<uint32_t>{1, 2}));
    EXPECT_EQ(outer.arrays()[1].as_array().to_vector<uint32_t>(), (std::vector<uint32_t>{3}));
}

TEST(GgufMetadataAccess, TypedGettersNameTheKey) {
    ByteBuilder b;
    b.header(3, 0, 2).str("llama.block_count").u32(4).u32(22).str("eps").u32(6).put<float>(1e-5f);
    const GgufFile f = GgufFile::from_bytes(b.bytes(), "m.gguf");
    const auto& m = f.metadata();
    EXPECT_EQ(m.get<uint32_t>("llama.block_count"), 22u);
    EXPECT_EQ(m.get_int("llama.block_count"), 22);
    EXPECT_FLOAT_EQ(m.get<float>("eps"), 1e-5f);
    EXPECT_FALSE(m.get_optional<uint32_t>("missing").has_value());
    try {
        m.get<uint32_t>("missing.key");
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_STREQ(e.what(), "m.gguf: metadata key 'missing.key' is missing");
    }
    try {
        m.get<float>("llama.block_count");
        FAIL();
    } catch (const FormatError& e) {
        EXPECT_STREQ(e.what(),
                     "m.gguf: metadata key 'llama.block_count' has type u32, expected f32");
    }
    EXPECT_THROW(m.get_string("eps"), FormatError);
}

TEST(GgufMetadataAccess, StringArraysAreViewsIntoTheFile) {
    GgufWriter w;
    w.metadata().set("tokens", GgufValue::array(GgufArray::of_strings({"a", "bc", ""})));
    const auto bytes = w.to_bytes();
    const GgufFile f = GgufFile::from_bytes(bytes, "v.gguf");
    const auto& strings = f.metadata().get_array("tokens").strings();
    ASSERT_EQ(strings.size(), 3u);
    EXPECT_EQ(strings[1], "bc");
    const auto* begin = reinterpret_cast<const char*>(bytes.data());
    EXPECT_GE(strings[1].data(), begin);
    EXPECT_LT(strings[1].data(), begin + bytes.size());
}

}  // namespace
}  // namespace minfer
