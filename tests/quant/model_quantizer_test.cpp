// `quantize_model` on the fixture models: the result matches what llama.cpp's llama-quantize
// made of the same models (metadata, tensor table, per-tensor types) and its weights are at least
// as close to the originals as llama.cpp's.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "common/fixtures.h"
#include "model_compare.h"
#include "quant/model_quantizer.h"

namespace minfer {
namespace {

struct FixtureCase {
    const char* input;  // F16 model
    QuantMix mix;
    const char* reference;  // the same model quantized by llama.cpp
};

class QuantizeFixtureModel : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(QuantizeFixtureModel, MatchesLlamaCppLayoutAndAccuracy) {
    const FixtureCase& c = GetParam();
    MINFER_REQUIRE_FIXTURE(input_path, std::string("models/") + c.input);
    MINFER_REQUIRE_FIXTURE(reference_path, std::string("models/") + c.reference);
    test::TempDir dir;
    const auto output_path = dir / "out.gguf";
    const ModelQuantizeResult result =
        quantize_model(input_path, output_path, c.mix, {.threads = 2});

    const GgufFile input = GgufFile::open(input_path);
    const GgufFile output = GgufFile::open(output_path);
    const GgufFile reference = GgufFile::open(reference_path);
    EXPECT_EQ(result.output_bytes, output.file_size());
    EXPECT_EQ(output.file_size(), reference.file_size());

    // Metadata: every key of llama.cpp's file, in its order, with its value (file_type included).
    const auto& ours = output.metadata().entries();
    const auto& theirs = reference.metadata().entries();
    ASSERT_EQ(ours.size(), theirs.size());
    for (std::size_t i = 0; i < ours.size(); ++i) {
        EXPECT_EQ(ours[i].key, theirs[i].key) << i;
        EXPECT_EQ(ours[i].value.to_display_string(), theirs[i].value.to_display_string())
            << ours[i].key;
    }
    EXPECT_EQ(output.metadata().get<uint32_t>("general.file_type"), static_cast<uint32_t>(c.mix));

    // Tensor table: same order, names, shapes, types and offsets.
    ASSERT_EQ(output.tensors().size(), reference.tensors().size());
    for (std::size_t i = 0; i < output.tensors().size(); ++i) {
        const TensorInfo& a = *output.tensors()[i];
        const TensorInfo& b = *reference.tensors()[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.type, b.type) << a.name << ": " << type_name(a.type) << " vs llama.cpp's "
                                  << type_name(b.type);
        EXPECT_EQ(a.ne, b.ne) << a.name;
        EXPECT_EQ(a.offset, b.offset) << a.name;
    }
    EXPECT_EQ(output.first_part().data_offset, reference.first_part().data_offset);

    // Weights: as close to the F16 originals as llama.cpp's (which started from the F32
    // originals, hence a small allowance).
    double sum_ours = 0;
    double sum_theirs = 0;
    int n_quantized = 0;
    for (const TensorInfo* t : output.tensors()) {
        const TensorInfo& original = input.tensor(t->name);
        const TensorInfo& theirs_t = reference.tensor(t->name);
        if (t->type == original.type) {
            EXPECT_TRUE(std::equal(t->data.begin(), t->data.end(), original.data.begin()))
                << t->name << " should be copied unchanged";
            continue;
        }
        const double our_error = test::tensor_relative_rmse(*t, original);
        const double their_error = test::tensor_relative_rmse(theirs_t, original);
        EXPECT_LE(our_error, their_error * 1.01 + 1e-4)
            << t->name << " (" << type_name(t->type) << ")";
        sum_ours += our_error;
        sum_theirs += their_error;
        ++n_quantized;
    }
    ASSERT_GT(n_quantized, 0);
    std::printf("  %s: mean relative RMSE of %d quantized tensors %.5f (llama.cpp %.5f)\n",
                c.reference, n_quantized, sum_ours / n_quantized, sum_theirs / n_quantized);
}

INSTANTIATE_TEST_SUITE_P(
    FixtureModels, QuantizeFixtureModel,
    ::testing::Values(
        FixtureCase{"tiny-llama-f16.gguf", QuantMix::Q4_K_M, "tiny-llama-q4_k_m.gguf"},
        FixtureCase{"tiny-llama-f16.gguf", QuantMix::Q4_0, "tiny-llama-q4_0.gguf"},
        FixtureCase{"tiny-llama-f16.gguf", QuantMix::Q8_0, "tiny-llama-q8_0.gguf"},
        FixtureCase{"tiny-qwen2-f16.gguf", QuantMix::Q4_K_M, "tiny-qwen2-q4_k_m.gguf"},
        FixtureCase{"tiny-qwen2-f16.gguf", QuantMix::Q8_0, "tiny-qwen2-q8_0.gguf"}),
    [](const ::testing::TestParamInfo<FixtureCase>& param_info) {
        std::string name = std::string(param_info.param.reference);
        name = name.substr(0, name.find('.'));
        for (char& ch : name) {
            if (ch == '-') ch = '_';
        }
        return name;
    });

}  // namespace
}  // namespace minfer
