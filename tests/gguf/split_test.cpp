// Split models: NAME-0000X-of-0000Y.gguf, opened through part 1.

#include <gtest/gtest.h>

#include "common/fixtures.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "gguf/split_path.h"

namespace minfer {
namespace {

TEST(SplitName, ParsesTheFiveDigitPattern) {
    auto s = parse_split_name("/m/model-00002-of-00003.gguf");
    ASSERT_TRUE(s);
    EXPECT_EQ(s->prefix, "/m/model");
    EXPECT_EQ(s->index, 2);
    EXPECT_EQ(s->count, 3);
    EXPECT_FALSE(parse_split_name("model.gguf"));
    EXPECT_FALSE(parse_split_name("model-0001-of-0003.gguf"));    // four digits
    EXPECT_FALSE(parse_split_name("model-00004-of-00003.gguf"));  // X > Y
    EXPECT_FALSE(parse_split_name("model-00000-of-00003.gguf"));  // X = 0
    EXPECT_FALSE(parse_split_name("model-000a1-of-00003.gguf"));
    EXPECT_EQ(split_part_path("/m/model", 3, 12).string(), "/m/model-00003-of-00012.gguf");
}

struct SplitOptions {
    int count = 3;
    int wrong_no_at = -1;        // write a wrong split.no in this part
    int64_t tensors_count = -1;  // override split.tensors.count
    bool duplicate_tensor = false;
};

// Writes `count` parts with two f32 tensors each under dir/model-*.
void write_split(const test::TempDir& dir, const SplitOptions& o) {
    static const std::vector<float> data(16, 1.0f);
    for (int i = 0; i < o.count; ++i) {
        GgufWriter w;
        w.metadata().set("general.architecture", GgufValue::string(i == 0 ? "llama" : "part"));
        w.metadata().set(
            "split.no", GgufValue::of<uint16_t>(static_cast<uint16_t>(i == o.wrong_no_at ? 7 : i)));
        w.metadata().set("split.count", GgufValue::of<uint16_t>(static_cast<uint16_t>(o.count)));
        w.metadata().set("split.tensors.count",
                         GgufValue::of<int32_t>(static_cast<int32_t>(
                             o.tensors_count >= 0 ? o.tensors_count : 2 * o.count)));
        const std::string a =
            o.duplicate_tensor && i == 1 ? "t0.a" : "t" + std::to_string(i) + ".a";
        w.add_tensor(a, GgmlType::F32, {16}, std::as_bytes(std::span(data)));
        w.add_tensor("t" + std::to_string(i) + ".b", GgmlType::F32, {8},
                     std::as_bytes(std::span(data).first(8)));
        w.write_file(split_part_path((dir / "model").string(), i + 1, o.count));
    }
}

std::string open_error(const std::filesystem::path& p) {
    try {
        GgufFile::open(p);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(SplitModel, OpensEveryPartThroughPartOne) {
    test::TempDir dir;
    write_split(dir, {});
    const GgufFile f = GgufFile::open(dir / "model-00001-of-00003.gguf");
    EXPECT_EQ(f.parts().size(), 3u);
    EXPECT_EQ(f.tensors().size(), 6u);
    EXPECT_EQ(f.metadata().get_string("general.architecture"), "llama");  // part 1's metadata
    ASSERT_NE(f.find_tensor("t2.b"), nullptr);
    EXPECT_EQ(f.find_tensor("t2.b")->n_bytes, 32u);
    EXPECT_EQ(f.find_tensor("nope"), nullptr);
    uint64_t sum = 0;
    for (const auto& p : f.parts()) sum += std::filesystem::file_size(p.path);
    EXPECT_EQ(f.file_size(), sum);
}

TEST(SplitModel, LaterPartNamesPartOne) {
    test::TempDir dir;
    write_split(dir, {});
    const std::string msg = open_error(dir / "model-00002-of-00003.gguf");
    EXPECT_NE(msg.find("part 2 of 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model-00001-of-00003.gguf"), std::string::npos) << msg;
}

TEST(SplitModel, MissingPartIsNamed) {
    test::TempDir dir;
    write_split(dir, {});
    std::filesystem::remove(dir / "model-00003-of-00003.gguf");
    const std::string msg = open_error(dir / "model-00001-of-00003.gguf");
    EXPECT_NE(msg.find("part 3 of 3 is missing"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model-00003-of-00003.gguf"), std::string::npos) << msg;
}

TEST(SplitModel, WrongSplitNo) {
    test::TempDir dir;
    write_split(dir, {.wrong_no_at = 1});
    EXPECT_NE(open_error(dir / "model-00001-of-00003.gguf").find("split.no is 7, expected 1"),
              std::string::npos);
}

TEST(SplitModel, WrongTensorCount) {
    test::TempDir dir;
    write_split(dir, {.tensors_count = 5});
    EXPECT_NE(open_error(dir / "model-00001-of-00003.gguf").find("split.tensors.count is 5"),
              std::string::npos);
}

TEST(SplitModel, DuplicateTensorAcrossParts) {
    test::TempDir dir;
    write_split(dir, {.duplicate_tensor = true});
    EXPECT_NE(open_error(dir / "model-00001-of-00003.gguf").find("'t0.a' also appears"),
              std::string::npos);
}

TEST(SplitModel, CountInNameDisagreesWithMetadata) {
    test::TempDir dir;
    write_split(dir, {.count = 2});
    std::filesystem::rename(dir / "model-00001-of-00002.gguf", dir / "other-00001-of-00003.gguf");
    EXPECT_NE(open_error(dir / "other-00001-of-00003.gguf").find("split.count is 2"),
              std::string::npos);
    std::filesystem::rename(dir / "other-00001-of-00003.gguf", dir / "plain.gguf");
    EXPECT_NE(open_error(dir / "plain.gguf").find("does not follow"), std::string::npos);
}

// A complete model (no split keys, or split.count = 1) under a split-like name: the metadata say
// it is whole, so it opens as one file whatever its name.
void write_whole(const std::filesystem::path& path, int split_count = 0) {
    static const std::vector<float> data(16, 1.0f);
    GgufWriter w;
    w.metadata().set("general.architecture", GgufValue::string("llama"));
    if (split_count > 0) {
        w.metadata().set("split.no", GgufValue::of<uint16_t>(0));
        w.metadata().set("split.count",
                         GgufValue::of<uint16_t>(static_cast<uint16_t>(split_count)));
        w.metadata().set("split.tensors.count", GgufValue::of<int32_t>(1));
    }
    w.add_tensor("t.a", GgmlType::F32, {16}, std::as_bytes(std::span(data)));
    w.write_file(path);
}

TEST(SplitModel, WholeFileNamedLikeAFirstPart) {
    test::TempDir dir;
    write_whole(dir / "x-00001-of-00002.gguf");
    const GgufFile f = GgufFile::open(dir / "x-00001-of-00002.gguf");
    EXPECT_EQ(f.parts().size(), 1u);
    EXPECT_EQ(f.tensors().size(), 1u);
    ASSERT_NE(f.find_tensor("t.a"), nullptr);
}

TEST(SplitModel, WholeFileNamedLikeALaterPart) {
    test::TempDir dir;
    write_whole(dir / "x-00002-of-00003.gguf");
    const GgufFile f = GgufFile::open(dir / "x-00002-of-00003.gguf");
    EXPECT_EQ(f.parts().size(), 1u);
    EXPECT_EQ(f.tensors().size(), 1u);
}

TEST(SplitModel, SplitCountOfOneIsWhole) {
    test::TempDir dir;
    write_whole(dir / "x-00001-of-00004.gguf", 1);
    write_whole(dir / "y-00003-of-00004.gguf", 1);
    EXPECT_EQ(GgufFile::open(dir / "x-00001-of-00004.gguf").parts().size(), 1u);
    EXPECT_EQ(GgufFile::open(dir / "y-00003-of-00004.gguf").parts().size(), 1u);
}

// The metadata of a real later part say it is one: refused, naming part 1, whether or not part 1
// is there.
TEST(SplitModel, LaterPartIsRefusedByItsMetadata) {
    test::TempDir dir;
    write_split(dir, {});
    std::filesystem::remove(dir / "model-00001-of-00003.gguf");
    const std::string msg = open_error(dir / "model-00003-of-00003.gguf");
    EXPECT_NE(msg.find("is part 3 of 3 of a split model; open the first part: "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("model-00001-of-00003.gguf"), std::string::npos) << msg;
}

TEST(ResolveModelPath, WholeFileNamedLikeALaterPart) {
    test::TempDir dir;
    write_whole(dir / "x-00002-of-00003.gguf");
    EXPECT_EQ(resolve_model_path(dir.path()), dir / "x-00002-of-00003.gguf");
    EXPECT_EQ(GgufFile::open(resolve_model_path(dir.path())).parts().size(), 1u);
}

// Parts 2 and 3 without part 1: one model, and opening it names the missing part 1.
TEST(ResolveModelPath, SplitWithoutItsFirstPart) {
    test::TempDir dir;
    write_split(dir, {});
    std::filesystem::remove(dir / "model-00001-of-00003.gguf");
    const auto entry = resolve_model_path(dir.path());
    EXPECT_EQ(entry, dir / "model-00002-of-00003.gguf");
    const std::string msg = open_error(entry);
    EXPECT_NE(msg.find("open the first part: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("model-00001-of-00003.gguf"), std::string::npos) << msg;
}

TEST(ResolveModelPath, DirectoryWithOneModel) {
    test::TempDir dir;
    write_split(dir, {});
    EXPECT_EQ(resolve_model_path(dir.path()), dir / "model-00001-of-00003.gguf");
    GgufWriter w;
    w.write_file(dir / "second.gguf");
    try {
        resolve_model_path(dir.path());
        FAIL();
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(
            msg.find("is a directory; GGUF files in it: model-00001-of-00003.gguf, second.gguf"),
            std::string::npos)
            << msg;
    }
    EXPECT_THROW(resolve_model_path(dir / "absent.gguf"), IoError);
}

}  // namespace
}  // namespace minfer
