// `minfer quantize` on mixtures of experts: 3-D expert tensors [n_in, n_out, n_expert] are
// quantized row by row like matrices (each expert's rows in turn), routers stay f32, and the
// types follow llama.cpp's llama_tensor_get_type: ffn_down_exps takes the ffn_down layer rules by
// the layer number in its name, and a model of exactly 8 experts gets Q8_0 attn_k / attn_v and a
// bumped attn_output. The quantized models load and run.

#include <gtest/gtest.h>

#include <set>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "model/model.h"
#include "model_compare.h"
#include "quant/model_quantizer.h"

namespace minfer {
namespace {

std::string blk(int layer, const char* tensor) {
    return "blk." + std::to_string(layer) + "." + tensor + ".weight";
}

// Relative RMSE bounds of test_quantize_model_files.cpp's kind for the types used here.
double max_error_of(GgmlType t) {
    switch (t) {
        case GgmlType::Q4_K:
            return 0.10;
        case GgmlType::Q5_0:
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

// Quantizes `model` to Q4_K_M and checks every tensor's type against `expected`, its shape, its
// error, and that the result runs.
void quantize_and_check(const std::string& model,
                        const std::function<GgmlType(const std::string&)>& expected) {
    MINFER_REQUIRE_FIXTURE(input_path, "models/" + model);
    test::TempDir dir;
    const auto out_path = dir / "q4_k_m.gguf";
    quantize_model(input_path, out_path, QuantMix::Q4_K_M, {.threads = 2});
    const GgufFile input = GgufFile::open(input_path);
    const GgufFile out = GgufFile::open(out_path);
    ASSERT_EQ(out.tensors().size(), input.tensors().size());
    int experts = 0;
    for (const TensorInfo* t : out.tensors()) {
        SCOPED_TRACE(t->name);
        const TensorInfo& original = input.tensor(t->name);
        EXPECT_EQ(t->ne, original.ne);
        EXPECT_EQ(t->n_dims, original.n_dims);
        EXPECT_EQ(t->type, expected(t->name)) << type_name(t->type);
        EXPECT_LE(test::tensor_relative_rmse(*t, original), max_error_of(t->type));
        experts += t->n_dims == 3;
    }
    EXPECT_GT(experts, 0);

    EngineOptions options;
    options.n_threads = 2;
    options.n_ctx = 64;
    auto t = test::make_engine(out_path, options);
    const test::LogitRows rows = test::evaluate_all(*t.engine, {1, 2, 3, 4, 5, 6, 7, 8});
    for (const auto& row : rows) {
        for (const float v : row) ASSERT_TRUE(std::isfinite(v));
    }
}

// qwen3moe, 4 layers, 8 experts of width 128 (ffn_down_exps rows of 128 values: Q4_K and Q6_K
// fall back to Q5_0 and Q8_0).
TEST(QuantizeExperts, Qwen3MoeQ4_K_M) {
    quantize_and_check("tiny-qwen3moe-f16.gguf", [](const std::string& name) {
        if (name.ends_with("norm.weight") || name.find("ffn_gate_inp") != std::string::npos)
            return GgmlType::F32;
        if (name == "output.weight") return GgmlType::Q6_K;
        for (int l = 0; l < 4; ++l) {
            if (name == blk(l, "attn_k") || name == blk(l, "attn_v")) return GgmlType::Q8_0;
            if (name == blk(l, "attn_output")) return GgmlType::Q5_K;
            // use_more_bits(l, 4): layers 2 and 3.
            if (name == blk(l, "ffn_down_exps")) return l >= 2 ? GgmlType::Q8_0 : GgmlType::Q5_0;
        }
        return GgmlType::Q4_K;  // attn_q, ffn_gate_exps, ffn_up_exps
    });
}

// Mixtral-style llama, 4 experts (no 8-expert rule), experts of width 256.
TEST(QuantizeExperts, MixtralQ4_K_M) {
    quantize_and_check("tiny-mixtral-f16.gguf", [](const std::string& name) {
        if (name.ends_with("norm.weight") || name.find("ffn_gate_inp") != std::string::npos)
            return GgmlType::F32;
        if (name == "output.weight") return GgmlType::Q6_K;
        for (int l = 0; l < 4; ++l) {
            const bool more_bits = l >= 2;  // use_more_bits(l, 4)
            if (name == blk(l, "attn_v") || name == blk(l, "ffn_down_exps"))
                return more_bits ? GgmlType::Q6_K : GgmlType::Q4_K;
        }
        return GgmlType::Q4_K;
    });
}

}  // namespace
}  // namespace minfer
