// quantize_model and `minfer quantize` as file operations: every mix on a real model, refusing
// to overwrite the input, the atomic write, threads, and the command line.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/fixtures.h"
#include "core/error.h"
#include "core/file_io.h"
#include "model_compare.h"
#include "quant/model_quantizer.h"
#include "synthetic_model.h"

namespace minfer {
namespace {

void write_all(const std::filesystem::path& p, std::string_view bytes) {
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Files in dir other than the ones named.
std::vector<std::string> other_files(const std::filesystem::path& dir,
                                     const std::vector<std::string>& expected) {
    std::vector<std::string> others;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (std::find(expected.begin(), expected.end(), name) == expected.end())
            others.push_back(name);
    }
    return others;
}

// Upper bounds on the relative RMSE of each weight type on the tiny models' random weights
// (uniform-like values: ~2^-bits of the range), loose enough for every tensor.
double max_error_of(GgmlType t) {
    switch (t) {
        case GgmlType::Q2_K:
            return 0.40;
        case GgmlType::Q3_K:
            return 0.20;
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q4_K:
        case GgmlType::IQ4_NL:
            return 0.10;
        case GgmlType::Q5_0:
        case GgmlType::Q5_1:
        case GgmlType::Q5_K:
            return 0.05;
        case GgmlType::Q6_K:
            return 0.025;
        case GgmlType::Q8_0:
            return 0.008;
        default:
            return 0.002;
    }
}

struct MixExpectation {
    QuantMix mix;
    GgmlType attn_q;      // the mix's base type
    GgmlType attn_v_0;    // blk.0.attn_v (4 layers, n_gqa 2)
    GgmlType ffn_down_3;  // blk.3.ffn_down
    GgmlType output;
};

class QuantizeEveryMix : public ::testing::TestWithParam<MixExpectation> {};

TEST_P(QuantizeEveryMix, TinyLlama) {
    const MixExpectation& e = GetParam();
    MINFER_REQUIRE_FIXTURE(input_path, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    const auto out_path = dir / "out.gguf";
    quantize_model(input_path, out_path, e.mix, {.threads = 2});
    const GgufFile input = GgufFile::open(input_path);
    const GgufFile out = GgufFile::open(out_path);

    EXPECT_EQ(out.metadata().get<uint32_t>("general.file_type"), static_cast<uint32_t>(e.mix));
    EXPECT_EQ(out.metadata().get<uint32_t>("general.quantization_version"), 2u);
    ASSERT_EQ(out.metadata().size(), input.metadata().size());
    for (const auto& [key, value] : input.metadata().entries()) {
        if (key == "general.file_type") continue;
        const GgufValue* kept = out.metadata().find(key);
        ASSERT_NE(kept, nullptr) << key;
        EXPECT_EQ(kept->to_display_string(), value.to_display_string()) << key;
    }
    EXPECT_EQ(out.tensor("blk.0.attn_q.weight").type, e.attn_q);
    EXPECT_EQ(out.tensor("blk.0.attn_v.weight").type, e.attn_v_0);
    EXPECT_EQ(out.tensor("blk.3.ffn_down.weight").type, e.ffn_down_3);
    EXPECT_EQ(out.tensor("output.weight").type, e.output);
    EXPECT_EQ(out.tensor("blk.0.attn_norm.weight").type, GgmlType::F32);

    ASSERT_EQ(out.tensors().size(), input.tensors().size());
    for (const TensorInfo* t : out.tensors()) {
        const TensorInfo& original = input.tensor(t->name);
        EXPECT_EQ(t->ne, original.ne) << t->name;
        const double error = test::tensor_relative_rmse(*t, original);
        EXPECT_LE(error, max_error_of(t->type)) << t->name << " " << type_name(t->type);
    }
}

INSTANTIATE_TEST_SUITE_P(
    Mixes, QuantizeEveryMix,
    ::testing::Values(MixExpectation{QuantMix::Q4_0, GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::Q4_0,
                                     GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q4_1, GgmlType::Q4_1, GgmlType::Q4_1, GgmlType::Q4_1,
                                     GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q5_0, GgmlType::Q5_0, GgmlType::Q5_0, GgmlType::Q5_0,
                                     GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q5_1, GgmlType::Q5_1, GgmlType::Q5_1, GgmlType::Q5_1,
                                     GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0,
                                     GgmlType::Q8_0},
                      MixExpectation{QuantMix::Q2_K, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q3_K,
                                     GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q3_K_M, GgmlType::Q3_K, GgmlType::Q5_K,
                                     GgmlType::Q4_K, GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q4_K_S, GgmlType::Q4_K, GgmlType::Q5_K,
                                     GgmlType::Q4_K, GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q4_K_M, GgmlType::Q4_K, GgmlType::Q4_K,
                                     GgmlType::Q6_K, GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q5_K_S, GgmlType::Q5_K, GgmlType::Q5_K,
                                     GgmlType::Q5_K, GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q5_K_M, GgmlType::Q5_K, GgmlType::Q5_K,
                                     GgmlType::Q6_K, GgmlType::Q6_K},
                      MixExpectation{QuantMix::Q6_K, GgmlType::Q6_K, GgmlType::Q6_K, GgmlType::Q6_K,
                                     GgmlType::Q6_K},
                      MixExpectation{QuantMix::IQ4_NL, GgmlType::IQ4_NL, GgmlType::IQ4_NL,
                                     GgmlType::IQ4_NL, GgmlType::Q6_K}),
    [](const ::testing::TestParamInfo<MixExpectation>& param_info) {
        return std::string(quant_mix_name(param_info.param.mix));
    });

TEST(QuantizeModelFiles, SameBytesWithAnyThreadCount) {
    MINFER_REQUIRE_FIXTURE(input_path, "models/tiny-qwen2-f16.gguf");
    test::TempDir dir;
    quantize_model(input_path, dir / "one.gguf", QuantMix::Q4_K_M, {.threads = 1});
    quantize_model(input_path, dir / "three.gguf", QuantMix::Q4_K_M, {.threads = 3});
    EXPECT_EQ(read_file(dir / "one.gguf"), read_file(dir / "three.gguf"));
}

TEST(QuantizeModelFiles, RefusesToOverwriteItsInput) {
    test::TempDir dir;
    const auto model = dir / "model.gguf";
    const std::vector<std::byte> bytes = test::build_synthetic_model({});
    write_all(model, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    const std::string before = read_file(model);

    EXPECT_THROW(quantize_model(model, model, QuantMix::Q4_0), UsageError);
    EXPECT_THROW(quantize_model(model, dir.path() / "." / "model.gguf", QuantMix::Q4_0),
                 UsageError);
    std::filesystem::create_hard_link(model, dir / "hard.gguf");
    EXPECT_THROW(quantize_model(model, dir / "hard.gguf", QuantMix::Q4_0), UsageError);
    std::filesystem::create_symlink(model, dir / "link.gguf");
    EXPECT_THROW(quantize_model(model, dir / "link.gguf", QuantMix::Q4_0), UsageError);
    EXPECT_THROW(quantize_model(dir / "link.gguf", model, QuantMix::Q4_0), UsageError);
    std::filesystem::create_directory(dir / "sub");
    EXPECT_THROW(quantize_model(model, dir / "sub", QuantMix::Q4_0), UsageError);
    EXPECT_THROW(quantize_model(model, dir / "x.gguf", QuantMix::Q4_0, {.threads = 0}), UsageError);
    EXPECT_THROW(quantize_model(dir / "missing.gguf", dir / "x.gguf", QuantMix::Q4_0), Error);
    EXPECT_THROW(quantize_model(model, dir / "no-such-dir" / "x.gguf", QuantMix::Q4_0), IoError);

    EXPECT_EQ(read_file(model), before);
    EXPECT_EQ(other_files(dir.path(), {"model.gguf", "hard.gguf", "link.gguf", "sub"}),
              std::vector<std::string>{});
}

// OUT is checked before the input is even opened: a FIFO is refused (not an IoError about the
// missing input) and no temporary is made.
TEST(QuantizeModelFiles, OutputThatIsNotAFileIsRefusedFirst) {
    test::TempDir dir;
    ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0644), 0);
    ModelQuantizeOptions options;
    bool made_temporary = false;
    options.on_temporary_file = [&](const std::filesystem::path&) { made_temporary = true; };
    try {
        quantize_model(dir / "missing.gguf", dir / "pipe", QuantMix::Q8_0, options);
        FAIL() << "expected UsageError";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("pipe: is a FIFO"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(made_temporary);
    EXPECT_TRUE(std::filesystem::is_fifo(dir / "pipe"));
    EXPECT_EQ(other_files(dir.path(), {"pipe"}), std::vector<std::string>{});
}

// A symlink as OUT: the file it names is replaced, the link stays.
TEST(QuantizeModelFiles, WritesThroughASymlink) {
    test::TempDir dir;
    const auto model = dir / "model.gguf";
    const std::vector<std::byte> bytes = test::build_synthetic_model({});
    write_all(model, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    std::filesystem::create_symlink("target.gguf", dir / "link.gguf");  // dangling: created
    const ModelQuantizeResult result = quantize_model(model, dir / "link.gguf", QuantMix::Q8_0);
    EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.gguf"));
    EXPECT_EQ(result.output_bytes, std::filesystem::file_size(dir / "target.gguf"));
    EXPECT_EQ(GgufFile::open(dir / "target.gguf").metadata().get<uint32_t>("general.file_type"),
              7u);
    EXPECT_EQ(other_files(dir.path(), {"model.gguf", "link.gguf", "target.gguf"}),
              std::vector<std::string>{});
}

// A run that fails half-way (here: the progress callback throws at the 10th tensor) leaves an
// existing OUT untouched and removes its temporary file; the temporary sits beside OUT.
TEST(QuantizeModelFiles, InterruptedRunLeavesOutputUntouched) {
    test::TempDir dir;
    const auto model = dir / "model.gguf";
    const std::vector<std::byte> bytes = test::build_synthetic_model({});
    write_all(model, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    const auto out = dir / "out.gguf";
    write_all(out, "previous contents");

    std::filesystem::path temporary;
    ModelQuantizeOptions options;
    options.on_temporary_file = [&](const std::filesystem::path& p) { temporary = p; };
    options.on_progress = [&](const QuantizeProgress& p) {
        if (p.tensor_index == 10) {
            EXPECT_TRUE(std::filesystem::exists(temporary));
            EXPECT_EQ(read_file(out), "previous contents");
            throw std::runtime_error("stop here");
        }
    };
    EXPECT_THROW(quantize_model(model, out, QuantMix::Q4_K_M, options), std::runtime_error);
    EXPECT_EQ(temporary.parent_path(), dir.path());
    EXPECT_TRUE(temporary.filename().string().starts_with("out.gguf.tmp-")) << temporary;
    EXPECT_FALSE(std::filesystem::exists(temporary));
    EXPECT_EQ(read_file(out), "previous contents");
    EXPECT_EQ(other_files(dir.path(), {"model.gguf", "out.gguf"}), std::vector<std::string>{});

    // Without the interruption the same call replaces OUT with a valid model.
    options.on_progress = {};
    quantize_model(model, out, QuantMix::Q4_K_M, options);
    EXPECT_EQ(GgufFile::open(out).metadata().get<uint32_t>("general.file_type"), 15u);
    EXPECT_EQ(other_files(dir.path(), {"model.gguf", "out.gguf"}), std::vector<std::string>{});
}

TEST(QuantizeModelFiles, NonFiniteWeightIsAFormatError) {
    test::TempDir dir;
    GgufWriter w;
    w.metadata().add("general.architecture", GgufValue::string("llama"));
    w.metadata().add("llama.block_count", GgufValue::of<uint32_t>(1));
    std::vector<float> values(256 * 4, 0.5f);
    values[256 * 2 + 7] = std::numeric_limits<float>::quiet_NaN();
    w.add_tensor("blk.0.attn_q.weight", GgmlType::F32, {256, 4},
                 std::as_bytes(std::span<const float>(values)));
    w.write_file(dir / "nan.gguf");
    try {
        quantize_model(dir / "nan.gguf", dir / "out.gguf", QuantMix::Q4_0, {.threads = 2});
        FAIL() << "expected FormatError";
    } catch (const FormatError& e) {
        EXPECT_NE(
            std::string(e.what()).find("tensor blk.0.attn_q.weight holds nan at row 2, column 7"),
            std::string::npos)
            << e.what();
    }
    EXPECT_EQ(other_files(dir.path(), {"nan.gguf"}), std::vector<std::string>{});
}

TEST(QuantizeModelFiles, BF16AndF32InputsConvert) {
    test::TempDir dir;
    for (GgmlType source : {GgmlType::BF16, GgmlType::F32}) {
        const std::vector<std::byte> bytes = test::build_synthetic_model({.weight_type = source});
        const auto in = dir / "in.gguf";
        write_all(in, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
        quantize_model(in, dir / "out.gguf", QuantMix::Q8_0);
        const GgufFile original = GgufFile::open(in);
        const GgufFile out = GgufFile::open(dir / "out.gguf");
        const TensorInfo& q = out.tensor("blk.1.ffn_up.weight");
        EXPECT_EQ(q.type, GgmlType::Q8_0);
        EXPECT_LE(test::tensor_relative_rmse(q, original.tensor("blk.1.ffn_up.weight")), 0.008);
    }
}

// ---- the command line ----

TEST(QuantizeCommand, ConvertsAndReports) {
    MINFER_REQUIRE_FIXTURE(input_path, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    const auto out = dir / "q.gguf";
    const auto r = test::run_minfer(
        {"quantize", input_path.string(), out.string(), "q4_k_m", "--threads", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Q4_K_M"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("30 of 39 tensors quantized"), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find('\r'), std::string::npos) << "no progress bar when stderr is not a tty";
    EXPECT_EQ(GgufFile::open(out).metadata().get<uint32_t>("general.file_type"), 15u);
}

TEST(QuantizeCommand, ErrorsAreOneLine) {
    MINFER_REQUIRE_FIXTURE(input_path, "models/tiny-llama-f16.gguf");
    test::TempDir dir;
    const auto out = (dir / "q.gguf").string();
    auto r = test::run_minfer({"quantize", input_path.string(), out, "q4_k_x"});
    EXPECT_EQ(r.exit_code, 2);  // a usage error
    EXPECT_NE(r.err.find("minfer: error: unknown quantization type 'q4_k_x'; expected one of Q4_0"),
              std::string::npos)
        << r.err;
    r = test::run_minfer({"quantize", input_path.string(), input_path.string(), "q8_0"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is the input model"), std::string::npos) << r.err;
    r = test::run_minfer({"quantize", input_path.string(), out, "q8_0", "--threads", "-1"});
    EXPECT_EQ(r.exit_code, 2);
    r = test::run_minfer({"quantize", (dir / "nope.gguf").string(), out, "q8_0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace minfer
