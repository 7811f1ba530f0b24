// Every rejection rule of the GGUF parser, each on a hand-built file, each asserting that the
// message names the problem.

#include <gtest/gtest.h>

#include "common/byte_builder.h"
#include "core/error.h"
#include "gguf/gguf_file.h"

namespace minfer {
namespace {

using test::ByteBuilder;

// Parses and returns the error message ("" if the parse succeeded).
std::string parse_error(const ByteBuilder& b) {
    try {
        GgufFile::from_bytes(b.bytes(), "hostile.gguf");
    } catch (const FormatError& e) {
        return e.what();
    }
    return "";
}

#define EXPECT_REJECTED(builder, ...)                                  \
    do {                                                               \
        const std::string msg = parse_error(builder);                  \
        ASSERT_FALSE(msg.empty()) << "accepted a malformed file";      \
        EXPECT_NE(msg.find("hostile.gguf"), std::string::npos) << msg; \
        for (const char* part : {__VA_ARGS__})                         \
            EXPECT_NE(msg.find(part), std::string::npos)               \
                << "missing '" << part << "' in: " << msg;             \
    } while (0)

// A header followed by one u32 KV pair "k" = 1.
ByteBuilder with_kv(const std::string& key, uint32_t type) {
    ByteBuilder b;
    b.header(3, 0, 1).str(key).u32(type);
    return b;
}

TEST(GgufRejects, BadMagicShowsTheBytesFound) {
    ByteBuilder b;
    b.raw("GGML").u32(3).i64(0).i64(0);
    EXPECT_REJECTED(b, "magic", "GGML", "GGUF");
    ByteBuilder bin;
    bin.raw(std::string("\x7f"
                        "ELF",
                        4))
        .zeros(20);
    EXPECT_REJECTED(bin, "\\x7fELF");
}

TEST(GgufRejects, TooShortForAHeader) {
    ByteBuilder b;
    b.raw("GG");
    EXPECT_REJECTED(b, "too short");
    ByteBuilder header_only;
    header_only.raw("GGUF").u32(3).u32(0);
    EXPECT_REJECTED(header_only, "truncated", "tensor count");
}

TEST(GgufRejects, Versions) {
    ByteBuilder v0;
    v0.header(0, 0, 0);
    EXPECT_REJECTED(v0, "version 0");
    ByteBuilder v1;
    v1.header(1, 0, 0);
    EXPECT_REJECTED(v1, "version 1", "no longer supported");
    ByteBuilder v4;
    v4.header(4, 0, 0);
    EXPECT_REJECTED(v4, "version 4", "newer");
    ByteBuilder big_endian;
    big_endian.header(0x03000000, 0, 0);
    EXPECT_REJECTED(big_endian, "byte order");
}

TEST(GgufRejects, NegativeCounts) {
    ByteBuilder t;
    t.header(3, -1, 0);
    EXPECT_REJECTED(t, "tensor count is negative");
    ByteBuilder kv;
    kv.header(3, 0, -5);
    EXPECT_REJECTED(kv, "key-value count is negative");
}

TEST(GgufRejects, CountsLargerThanTheFileCouldHold) {
    ByteBuilder kv;
    kv.header(3, 0, int64_t{1} << 40);
    EXPECT_REJECTED(kv, "key-value count", "remaining bytes");
    ByteBuilder t;
    t.header(3, 1'000'000, 0).zeros(100);
    EXPECT_REJECTED(t, "tensor count 1000000", "remaining bytes");
}

TEST(GgufRejects, EmptyKey) {
    ByteBuilder b;
    b.header(3, 0, 1).str("").u32(4).u32(7);
    EXPECT_REJECTED(b, "empty key");
}

TEST(GgufRejects, DuplicateKey) {
    ByteBuilder b;
    b.header(3, 0, 2).str("a.b").u32(4).u32(1).str("a.b").u32(4).u32(2);
    EXPECT_REJECTED(b, "duplicate metadata key 'a.b'");
}

TEST(GgufRejects, UnknownValueType) {
    ByteBuilder b = with_kv("k", 13);
    b.u32(0);
    EXPECT_REJECTED(b, "type of key 'k'", "13");
}

TEST(GgufRejects, StringLongerThanTheFile) {
    ByteBuilder b;
    b.header(3, 0, 1).str("k").u32(8).u64(1000).raw("abc");
    EXPECT_REJECTED(b, "length 1000", "remain");
}

TEST(GgufRejects, StringOverOneGiB) {
    ByteBuilder b;
    b.header(3, 0, 1).str("k").u32(8).u64((uint64_t{1} << 30) + 1).raw("abc");
    EXPECT_REJECTED(b, "limit");
}

TEST(GgufRejects, KeyLengthLargerThanTheFile) {
    ByteBuilder b;
    b.header(3, 0, 1).u64(uint64_t{1} << 62).zeros(16);
    EXPECT_REJECTED(b, "key of metadata entry 0", "length");
}

TEST(GgufRejects, ArrayLongerThanTheFile) {
    ByteBuilder b;
    b.header(3, 0, 1).str("arr").u32(9).u32(6).u64(1'000'000).zeros(64);
    EXPECT_REJECTED(b, "key 'arr'", "1000000", "remain");
}

TEST(GgufRejects, ArrayOverTheElementLimit) {
    ByteBuilder b;
    b.header(3, 0, 1).str("arr").u32(9).u32(0).u64(uint64_t{1} << 40).zeros(64);
    EXPECT_REJECTED(b, "key 'arr'", "limit");
}

TEST(GgufRejects, ArrayOfUnknownType) {
    ByteBuilder b;
    b.header(3, 0, 1).str("arr").u32(9).u32(42).u64(1).zeros(8);
    EXPECT_REJECTED(b, "element type of array 'arr'", "42");
}

TEST(GgufRejects, NestingDeeperThanTheLimit) {
    ByteBuilder b;
    b.header(3, 0, 1).str("deep").u32(9);
    for (int i = 0; i < 20; ++i) b.u32(9).u64(1);
    b.u32(4).u64(0);
    EXPECT_REJECTED(b, "key 'deep'", "nested deeper");
}

TEST(GgufRejects, BoolOtherThanZeroOrOne) {
    ByteBuilder c;
    c.header(3, 0, 1).str("flag").u32(7).put<uint8_t>(2);
    EXPECT_REJECTED(c, "key 'flag'", "bool value is 2");
    ByteBuilder arr;
    arr.header(3, 0, 1)
        .str("flags")
        .u32(9)
        .u32(7)
        .u64(3)
        .put<uint8_t>(1)
        .put<uint8_t>(0)
        .put<uint8_t>(5);
    EXPECT_REJECTED(arr, "key 'flags'", "bool element 2 is 5");
}

TEST(GgufRejects, AlignmentOfWrongTypeZeroOrNotPowerOfTwo) {
    ByteBuilder wrong_type;
    wrong_type.header(3, 0, 1).str("general.alignment").u32(10).u64(32);
    EXPECT_REJECTED(wrong_type, "general.alignment has type u64", "expected u32");
    ByteBuilder zero;
    zero.header(3, 0, 1).str("general.alignment").u32(4).u32(0);
    EXPECT_REJECTED(zero, "general.alignment is 0", "power of two");
    ByteBuilder npot;
    npot.header(3, 0, 1).str("general.alignment").u32(4).u32(48);
    EXPECT_REJECTED(npot, "general.alignment is 48");
}

// A file with one tensor: name, dims, type id, offset (then padding and `data_bytes` of data).
ByteBuilder one_tensor(const std::string& name, std::vector<int64_t> dims, uint32_t type,
                       uint64_t offset, std::size_t data_bytes) {
    ByteBuilder b;
    b.header(3, 1, 0).str(name).u32(static_cast<uint32_t>(dims.size()));
    for (int64_t d : dims) b.i64(d);
    b.u32(type).u64(offset).pad_to(32).zeros(data_bytes);
    return b;
}

TEST(GgufRejects, TensorNameOf64Bytes) {
    EXPECT_REJECTED(one_tensor(std::string(64, 'x'), {4}, 0, 0, 16), "name of 64 bytes");
    EXPECT_EQ(parse_error(one_tensor(std::string(63, 'x'), {4}, 0, 0, 16)), "");
}

TEST(GgufRejects, DuplicateTensorName) {
    ByteBuilder b;
    b.header(3, 2, 0);
    b.str("w").u32(1).i64(8).u32(0).u64(0);
    b.str("w").u32(1).i64(8).u32(0).u64(32);
    b.pad_to(32).zeros(64);
    EXPECT_REJECTED(b, "duplicate tensor name 'w'");
}

TEST(GgufRejects, MoreThanFourDimensions) {
    EXPECT_REJECTED(one_tensor("w", {1, 1, 1, 1, 1}, 0, 0, 4), "tensor 'w' has 5 dimensions");
}

TEST(GgufRejects, NegativeDimension) {
    EXPECT_REJECTED(one_tensor("w", {4, -2}, 0, 0, 16), "negative dimension 1", "-2");
}

TEST(GgufRejects, ElementCountOverflow) {
    EXPECT_REJECTED(one_tensor("w", {int64_t{1} << 40, int64_t{1} << 40}, 0, 0, 0),
                    "too many elements");
}

TEST(GgufRejects, ByteSizeOverflow) {
    // 2^62 f32 elements fit an int64 count but not a 64-bit byte size.
    EXPECT_REJECTED(one_tensor("w", {int64_t{1} << 62}, 0, 0, 0), "too large in bytes");
}

TEST(GgufRejects, UnknownTypeId) {
    EXPECT_REJECTED(one_tensor("w", {32}, 43, 0, 128), "type id 43", "not a ggml type");
    EXPECT_REJECTED(one_tensor("w", {32}, 0xFFFFFFFF, 0, 128), "4294967295");
}

TEST(GgufRejects, RemovedTypeIdsByName) {
    const std::pair<uint32_t, const char*> removed[] = {
        {4, "q4_2"},      {5, "q4_3"},        {31, "q4_0_4_4"},   {32, "q4_0_4_8"},
        {33, "q4_0_8_8"}, {36, "iq4_nl_4_4"}, {37, "iq4_nl_4_8"}, {38, "iq4_nl_8_8"}};
    for (const auto& [id, name] : removed) {
        SCOPED_TRACE(name);
        EXPECT_REJECTED(one_tensor("w", {32}, id, 0, 64), name, "removed");
    }
}

TEST(GgufRejects, RowNotAWholeNumberOfBlocks) {
    EXPECT_REJECTED(one_tensor("w", {48, 2}, 2 /* q4_0 */, 0, 64), "48 elements per row",
                    "block size 32");
    EXPECT_REJECTED(one_tensor("w", {128}, 12 /* q4_K */, 0, 144), "block size 256");
}

TEST(GgufRejects, FirstTensorOffsetNotZero) {
    EXPECT_REJECTED(one_tensor("w", {4}, 0, 32, 64), "tensor 'w' has data offset 32, expected 0");
}

TEST(GgufRejects, RunningSumOfPaddedSizes) {
    // Two f32 tensors of 3 elements (12 bytes): the second must start at 32, not 12.
    ByteBuilder b;
    b.header(3, 2, 0);
    b.str("a").u32(1).i64(3).u32(0).u64(0);
    b.str("b").u32(1).i64(3).u32(0).u64(12);
    b.pad_to(32).zeros(64);
    EXPECT_REJECTED(b, "tensor 'b' has data offset 12, expected 32");
}

TEST(GgufRejects, TruncatedDataSection) {
    ByteBuilder b = one_tensor("w", {1024}, 0, 0, 1000);
    const std::string msg = parse_error(b);
    const uint64_t data_start = b.size() - 1000;
    EXPECT_NE(msg.find("truncated: expected " + std::to_string(data_start + 4096) +
                       " bytes, found " + std::to_string(b.size())),
              std::string::npos)
        << msg;
}

TEST(GgufRejects, TruncatedInsideTheTensorTable) {
    ByteBuilder b;
    b.header(3, 1, 0).str("w").u32(2).i64(4);
    b.zeros(8);  // enough bytes to pass the count check, not enough for the table
    EXPECT_REJECTED(b, "truncated");
}

TEST(GgufRejects, ErrorsCarryTheOffset) {
    ByteBuilder b;
    b.header(3, 0, 1).str("").u32(4).u32(7);
    EXPECT_REJECTED(b, "at offset 24");
}

}  // namespace
}  // namespace minfer
