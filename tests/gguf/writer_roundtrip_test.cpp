// Write a file with every metadata type and several tensor types, read it back, compare all.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/fixtures.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"

namespace minfer {
namespace {

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensors) {
    GgufWriter w;
    auto& m = w.metadata();
    m.set("u8", GgufValue::of<uint8_t>(200));
    m.set("i8", GgufValue::of<int8_t>(-100));
    m.set("u16", GgufValue::of<uint16_t>(60000));
    m.set("i16", GgufValue::of<int16_t>(-30000));
    m.set("u32", GgufValue::of<uint32_t>(4000000000u));
    m.set("i32", GgufValue::of<int32_t>(-2000000000));
    m.set("f32", GgufValue::of<float>(3.25f));
    m.set("bool", GgufValue::of<bool>(true));
    m.set("string", GgufValue::string("héllo\nworld"));
    m.set("u64", GgufValue::of<uint64_t>(uint64_t{1} << 63));
    m.set("i64", GgufValue::of<int64_t>(-(int64_t{1} << 62)));
    m.set("f64", GgufValue::of<double>(-1.5e300));
    m.set("arr.f32", GgufValue::array(GgufArray::of(std::vector<float>{1.f, -2.f, 0.5f})));
    m.set("arr.i32", GgufValue::array(GgufArray::of(std::vector<int32_t>{7, -8})));
    m.set("arr.bool", GgufValue::array(GgufArray::of_bools({true, false, true})));
    m.set("arr.str", GgufValue::array(GgufArray::of_strings({"x", "", "zz"})));
    m.set("arr.empty", GgufValue::array(GgufArray::of(std::vector<uint64_t>{})));
    m.set("arr.nested", GgufValue::array(GgufArray::of_arrays(
                            {GgufValue::array(GgufArray::of(std::vector<uint8_t>{1, 2})),
                             GgufValue::array(GgufArray::of_strings({"deep"}))})));

    std::mt19937 rng(42);
    std::vector<std::byte> f32(4 * 10 * 3), q4k(144 * 2), q8(34 * 4 * 5), f16(2 * 7);
    for (auto* buf : {&f32, &q4k, &q8, &f16})
        for (auto& b : *buf) b = static_cast<std::byte>(rng());
    w.add_tensor("t.f32", GgmlType::F32, {10, 3}, f32);
    w.add_tensor("t.q4_K", GgmlType::Q4_K, {512}, q4k);
    w.add_tensor("t.q8_0", GgmlType::Q8_0, {128, 5}, q8);
    w.add_tensor("t.f16", GgmlType::F16, {7}, [&](std::span<std::byte> out) {
        std::memcpy(out.data(), f16.data(), out.size());
    });

    test::TempDir dir;
    const auto path = dir / "roundtrip.gguf";
    w.write_file(path);
    const GgufFile f = GgufFile::open(path);
    const auto& r = f.metadata();

    ASSERT_EQ(r.size(), m.size());
    for (std::size_t i = 0; i < m.size(); ++i) {
        EXPECT_EQ(r.entries()[i].key, m.entries()[i].key);
        EXPECT_EQ(r.entries()[i].value.to_display_string(),
                  m.entries()[i].value.to_display_string());
    }
    EXPECT_EQ(r.get<uint8_t>("u8"), 200);
    EXPECT_EQ(r.get<int8_t>("i8"), -100);
    EXPECT_EQ(r.get<uint16_t>("u16"), 60000);
    EXPECT_EQ(r.get<int16_t>("i16"), -30000);
    EXPECT_EQ(r.get<uint32_t>("u32"), 4000000000u);
    EXPECT_EQ(r.get<int32_t>("i32"), -2000000000);
    EXPECT_EQ(r.get<float>("f32"), 3.25f);
    EXPECT_EQ(r.get<bool>("bool"), true);
    EXPECT_EQ(r.get_string("string"), "héllo\nworld");
    EXPECT_EQ(r.get<uint64_t>("u64"), uint64_t{1} << 63);
    EXPECT_EQ(r.get<int64_t>("i64"), -(int64_t{1} << 62));
    EXPECT_EQ(r.get<double>("f64"), -1.5e300);
    EXPECT_EQ(r.get_array("arr.f32").to_vector<float>(), (std::vector<float>{1.f, -2.f, 0.5f}));
    EXPECT_EQ(r.get_array("arr.i32").to_vector<int32_t>(), (std::vector<int32_t>{7, -8}));
    EXPECT_EQ(r.get_array("arr.bool").size(), 3u);
    EXPECT_EQ(r.get_array("arr.bool").at<uint8_t>(1), 0);
    EXPECT_EQ(r.get_array("arr.str").strings(), (std::vector<std::string_view>{"x", "", "zz"}));
    EXPECT_EQ(r.get_array("arr.empty").size(), 0u);
    EXPECT_EQ(r.get_array("arr.nested").arrays()[1].as_array().strings()[0], "deep");

    ASSERT_EQ(f.tensors().size(), 4u);
    const std::pair<const char*, const std::vector<std::byte>*> expected[] = {
        {"t.f32", &f32}, {"t.q4_K", &q4k}, {"t.q8_0", &q8}, {"t.f16", &f16}};
    for (const auto& [name, bytes] : expected) {
        const TensorInfo& t = f.tensor(name);
        ASSERT_EQ(t.data.size(), bytes->size()) << name;
        EXPECT_EQ(std::memcmp(t.data.data(), bytes->data(), bytes->size()), 0) << name;
        EXPECT_EQ(t.offset % 32, 0u);
    }
    EXPECT_EQ(f.tensor("t.q8_0").type, GgmlType::Q8_0);
    EXPECT_EQ(f.tensor("t.q8_0").ne[1], 5);
}

TEST(GgufWriter, RefusesBadTensors) {
    GgufWriter w;
    std::vector<std::byte> b(18);
    EXPECT_THROW(w.add_tensor(std::string(64, 'n'), GgmlType::Q4_0, {32}, b), Error);
    EXPECT_THROW(w.add_tensor("x", GgmlType::Q4_0, {16}, b), Error);  // not whole blocks
    EXPECT_THROW(w.add_tensor("x", GgmlType::Q4_0, {64}, b), Error);  // wrong byte count
    EXPECT_THROW(w.add_tensor("x", GgmlType::F32, {1, 1, 1, 1, 1}, b), Error);
    w.add_tensor("x", GgmlType::Q4_0, {32}, b);
    EXPECT_THROW(w.add_tensor("x", GgmlType::Q4_0, {32}, b), Error);
    EXPECT_THROW(w.set_alignment(24), Error);
}

}  // namespace
}  // namespace minfer
