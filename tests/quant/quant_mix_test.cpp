// Which tensor gets which type in each mix: llama.cpp's rules (llama_tensor_get_type) written out
// as literal expectations for synthetic models, plus the mix names and file_type numbers.

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.h"
#include "quant/model_quantizer.h"
#include "quant/quant_mix.h"
#include "synthetic_model.h"

namespace minfer {
namespace {

// name -> output type, from the plan of a synthetic model.
std::map<std::string, GgmlType> plan_types(const test::SyntheticModel& m, QuantMix mix) {
    const std::vector<std::byte> bytes = test::build_synthetic_model(m);
    const GgufFile file = GgufFile::from_bytes(bytes, "synthetic.gguf");
    std::map<std::string, GgmlType> types;
    for (const TensorConversion& c : plan_model_quantization(file, mix).tensors) {
        types[c.tensor->name] = c.output_type;
    }
    return types;
}

std::string blk(int layer, const char* tensor) {
    return "blk." + std::to_string(layer) + "." + tensor + ".weight";
}

TEST(QuantMix, NamesAndLlamaCppFileTypeNumbers) {
    const std::map<std::string, uint32_t> expected = {
        {"Q4_0", 2},    {"Q4_1", 3},    {"Q8_0", 7},    {"Q5_0", 8},    {"Q5_1", 9},
        {"Q2_K", 10},   {"Q3_K_S", 11}, {"Q3_K_M", 12}, {"Q3_K_L", 13}, {"Q4_K_S", 14},
        {"Q4_K_M", 15}, {"Q5_K_S", 16}, {"Q5_K_M", 17}, {"Q6_K", 18},   {"IQ4_NL", 25},
        {"F16", 1},     {"BF16", 32},   {"F32", 0}};
    for (const auto& [name, number] : expected) {
        const auto mix = quant_mix_from_name(name);
        ASSERT_TRUE(mix) << name;
        EXPECT_EQ(static_cast<uint32_t>(*mix), number) << name;
        EXPECT_EQ(quant_mix_name(*mix), name);
    }
    EXPECT_EQ(quant_mix_from_name("q4_k_m"), QuantMix::Q4_K_M);
    EXPECT_EQ(quant_mix_from_name("Q4_K"), QuantMix::Q4_K_M);
    EXPECT_EQ(quant_mix_from_name("q5_k"), QuantMix::Q5_K_M);
    EXPECT_EQ(quant_mix_from_name("Q3_K"), QuantMix::Q3_K_M);
    EXPECT_FALSE(quant_mix_from_name("Q4_K_X"));
    EXPECT_FALSE(quant_mix_from_name("IQ2_XXS"));
    EXPECT_FALSE(quant_mix_from_name(""));
}

TEST(QuantMix, OnlyMatricesAreQuantized) {
    const auto types = plan_types({.v_bias = true}, QuantMix::Q4_0);
    EXPECT_EQ(types.at("output_norm.weight"), GgmlType::F32);
    EXPECT_EQ(types.at("blk.0.attn_norm.weight"), GgmlType::F32);
    EXPECT_EQ(types.at("blk.0.attn_v.bias"), GgmlType::F32);
    EXPECT_EQ(types.at("blk.0.attn_q.weight"), GgmlType::Q4_0);
    EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q4_0);
    EXPECT_EQ(types.at("output.weight"), GgmlType::Q6_K);  // every mix but Q8_0
}

// 16 layers: use_more_bits picks layers 0, 1 (first eighth), 14, 15 (last eighth) and every third
// in between: 4, 7, 10, 13.
const std::set<int> kMoreBitsOf16 = {0, 1, 4, 7, 10, 13, 14, 15};

TEST(QuantMix, Q4_K_MGivesMoreBitsToSomeAttnVAndFfnDown) {
    const auto types = plan_types({.n_layer = 16}, QuantMix::Q4_K_M);
    EXPECT_EQ(types.at("output.weight"), GgmlType::Q6_K);
    EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q4_K);
    for (int l = 0; l < 16; ++l) {
        const GgmlType more = kMoreBitsOf16.count(l) ? GgmlType::Q6_K : GgmlType::Q4_K;
        EXPECT_EQ(types.at(blk(l, "attn_v")), more) << l;
        EXPECT_EQ(types.at(blk(l, "ffn_down")), more) << l;
        for (const char* same : {"attn_q", "attn_k", "attn_output", "ffn_gate", "ffn_up"}) {
            EXPECT_EQ(types.at(blk(l, same)), GgmlType::Q4_K) << same << " " << l;
        }
    }
}

TEST(QuantMix, Q5_K_MAndQ5_K_S) {
    const auto m = plan_types({.n_layer = 16}, QuantMix::Q5_K_M);
    const auto s = plan_types({.n_layer = 16}, QuantMix::Q5_K_S);
    for (int l = 0; l < 16; ++l) {
        const GgmlType more = kMoreBitsOf16.count(l) ? GgmlType::Q6_K : GgmlType::Q5_K;
        EXPECT_EQ(m.at(blk(l, "attn_v")), more) << l;
        EXPECT_EQ(m.at(blk(l, "ffn_down")), more) << l;
        EXPECT_EQ(m.at(blk(l, "attn_output")), GgmlType::Q5_K) << l;
        EXPECT_EQ(s.at(blk(l, "attn_v")), GgmlType::Q5_K) << l;
        EXPECT_EQ(s.at(blk(l, "ffn_down")), GgmlType::Q5_K) << l;
    }
    EXPECT_EQ(m.at("output.weight"), GgmlType::Q6_K);
    EXPECT_EQ(s.at("output.weight"), GgmlType::Q6_K);
}

TEST(QuantMix, Q4_K_SBumpsFirstLayers) {
    const auto types = plan_types({.n_layer = 16}, QuantMix::Q4_K_S);
    for (int l = 0; l < 16; ++l) {
        EXPECT_EQ(types.at(blk(l, "attn_v")), l < 4 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
        EXPECT_EQ(types.at(blk(l, "ffn_down")), l < 2 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
    }
}

TEST(QuantMix, Q3_K_M) {
    const auto types = plan_types({.n_layer = 16}, QuantMix::Q3_K_M);
    for (int l = 0; l < 16; ++l) {
        EXPECT_EQ(types.at(blk(l, "attn_v")), l < 2 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
        EXPECT_EQ(types.at(blk(l, "ffn_down")), l < 1 ? GgmlType::Q5_K : GgmlType::Q4_K) << l;
        EXPECT_EQ(types.at(blk(l, "attn_output")), GgmlType::Q4_K) << l;
        EXPECT_EQ(types.at(blk(l, "attn_q")), GgmlType::Q3_K) << l;
        EXPECT_EQ(types.at(blk(l, "ffn_up")), GgmlType::Q3_K) << l;
    }
    EXPECT_EQ(types.at("output.weight"), GgmlType::Q6_K);
}

TEST(QuantMix, Q2_KDependsOnGroupedQueryRatio) {
    const auto gqa4 = plan_types({.n_head = 8, .n_head_kv = 2}, QuantMix::Q2_K);
    const auto gqa2 = plan_types({.n_head = 8, .n_head_kv = 4}, QuantMix::Q2_K);
    for (int l = 0; l < 4; ++l) {
        EXPECT_EQ(gqa4.at(blk(l, "attn_v")), GgmlType::Q4_K);
        EXPECT_EQ(gqa2.at(blk(l, "attn_v")), GgmlType::Q3_K);
        EXPECT_EQ(gqa4.at(blk(l, "ffn_down")), GgmlType::Q3_K);
        EXPECT_EQ(gqa4.at(blk(l, "attn_output")), GgmlType::Q3_K);
        EXPECT_EQ(gqa4.at(blk(l, "attn_q")), GgmlType::Q2_K);
    }
}

TEST(QuantMix, Q8_0AndQ6_KKeepTheirTypeForTheOutput) {
    EXPECT_EQ(plan_types({}, QuantMix::Q8_0).at("output.weight"), GgmlType::Q8_0);
    EXPECT_EQ(plan_types({}, QuantMix::Q6_K).at("output.weight"), GgmlType::Q6_K);
    EXPECT_EQ(plan_types({}, QuantMix::Q6_K).at(blk(3, "ffn_down")), GgmlType::Q6_K);
}

TEST(QuantMix, TiedEmbeddingIsTreatedAsTheOutput) {
    const auto types = plan_types({.tied_output = true}, QuantMix::Q4_K_M);
    EXPECT_EQ(types.count("output.weight"), 0u);
    EXPECT_EQ(types.at("token_embd.weight"), GgmlType::Q6_K);
}

// Rows of 96 values fit no 256-value K-quant: Q4_K -> Q5_0, Q6_K -> Q8_0, Q3_K -> IQ4_NL.
// Rows of 48 fit no 32-value type either: F16. The output's row length decides Q8_0 directly.
TEST(QuantMix, FallbacksWhenRowsDoNotFitTheBlocks) {
    const test::SyntheticModel narrow_ff{.n_layer = 8, .n_ff = 96};
    const auto q4km = plan_types(narrow_ff, QuantMix::Q4_K_M);
    // 8 layers: use_more_bits picks 0, 3, 6, 7.
    EXPECT_EQ(q4km.at(blk(0, "ffn_down")), GgmlType::Q8_0);  // a Q6_K layer
    EXPECT_EQ(q4km.at(blk(3, "ffn_down")), GgmlType::Q8_0);
    EXPECT_EQ(q4km.at(blk(1, "ffn_down")), GgmlType::Q5_0);  // a Q4_K layer
    EXPECT_EQ(q4km.at(blk(2, "ffn_down")), GgmlType::Q5_0);
    EXPECT_EQ(q4km.at(blk(2, "ffn_up")), GgmlType::Q4_K);  // rows of n_embd = 256 fit
    const auto q3km = plan_types(narrow_ff, QuantMix::Q3_K_M);
    EXPECT_EQ(q3km.at(blk(1, "ffn_down")), GgmlType::Q5_0);  // Q4_K -> Q5_0
    const auto q5ks = plan_types(narrow_ff, QuantMix::Q5_K_S);
    EXPECT_EQ(q5ks.at(blk(1, "ffn_down")), GgmlType::Q5_1);  // Q5_K -> Q5_1
    const auto q2k = plan_types(narrow_ff, QuantMix::Q2_K);
    EXPECT_EQ(q2k.at(blk(1, "ffn_down")), GgmlType::IQ4_NL);  // Q3_K -> IQ4_NL

    const test::SyntheticModel tiny_ff{.n_ff = 48};
    EXPECT_EQ(plan_types(tiny_ff, QuantMix::Q4_K_M).at(blk(0, "ffn_down")), GgmlType::F16);
    EXPECT_THROW(plan_types(tiny_ff, QuantMix::Q4_0), UnsupportedError);

    const test::SyntheticModel narrow_embd{.n_embd = 96, .n_kv = 32};
    const auto q4km_embd = plan_types(narrow_embd, QuantMix::Q4_K_M);
    EXPECT_EQ(q4km_embd.at("output.weight"), GgmlType::Q8_0);
    EXPECT_EQ(q4km_embd.at(blk(0, "attn_q")), GgmlType::Q5_0);
}

TEST(QuantMix, FallbackCountIsReported) {
    const std::vector<std::byte> bytes = test::build_synthetic_model({.n_layer = 8, .n_ff = 96});
    const GgufFile file = GgufFile::from_bytes(bytes, "synthetic.gguf");
    EXPECT_EQ(plan_model_quantization(file, QuantMix::Q4_K_M).fallback_count, 8);
    EXPECT_EQ(plan_model_quantization(file, QuantMix::Q8_0).fallback_count, 0);
}

TEST(QuantMix, FloatMixesConvertEveryMatrix) {
    const auto types = plan_types({}, QuantMix::BF16);
    EXPECT_EQ(types.at("output.weight"), GgmlType::BF16);
    EXPECT_EQ(types.at(blk(0, "ffn_down")), GgmlType::BF16);
    EXPECT_EQ(types.at("output_norm.weight"), GgmlType::F32);
}

TEST(QuantMix, RefusesToRequantize) {
    const std::vector<std::byte> bytes =
        test::build_synthetic_model({.weight_type = GgmlType::F32});
    const GgufFile f32 = GgufFile::from_bytes(bytes, "f32.gguf");
    EXPECT_NO_THROW(plan_model_quantization(f32, QuantMix::Q4_0));
    // A tensor already quantized: the plan names it.
    GgufWriter w;
    w.metadata().add("general.architecture", GgufValue::string("llama"));
    w.metadata().add("llama.block_count", GgufValue::of<uint32_t>(1));
    std::vector<std::byte> q(18 * 8 * 4);
    w.add_tensor("blk.0.attn_q.weight", GgmlType::Q4_0, {256, 4}, q);
    const std::vector<std::byte> qbytes = w.to_bytes();
    const GgufFile quantized = GgufFile::from_bytes(qbytes, "q.gguf");
    try {
        plan_model_quantization(quantized, QuantMix::Q8_0);
        FAIL() << "expected UnsupportedError";
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("blk.0.attn_q.weight has type q4_0"),
                  std::string::npos)
            << e.what();
    }
}

TEST(QuantMix, MissingArchitectureMetadataIsAFormatError) {
    GgufWriter w;
    w.metadata().add("general.architecture", GgufValue::string("llama"));
    const std::vector<std::byte> bytes = w.to_bytes();
    const GgufFile file = GgufFile::from_bytes(bytes, "no-blocks.gguf");
    EXPECT_THROW(plan_model_quantization(file, QuantMix::Q4_0), FormatError);
}

}  // namespace
}  // namespace minfer
