// The per-layer configurations of gemma2, gemma3, phi3 and the mixtures of experts, read from
// metadata: sliding-window layers, soft-caps, RoPE bases and scaling per layer, query scales (the
// 27B rules that llama.cpp applies by layer count), LongRoPE's attention factor and its choice of
// factors by context (these last two, and Gemma 3's RoPE scaling, have no golden fixture), and
// the checks on the expert keys and tensors.

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "core/error.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/architecture.h"
#include "model/model.h"

namespace minfer {
namespace {

// Metadata of a decoder of `arch` with the given shape.
GgufMetadata shape_metadata(const std::string& arch, uint32_t n_layer, uint32_t n_embd,
                            uint32_t n_head, uint32_t head_dim) {
    GgufMetadata m("test.gguf");
    m.set("general.architecture", GgufValue::string(arch));
    m.set(arch + ".block_count", GgufValue::of<uint32_t>(n_layer));
    m.set(arch + ".embedding_length", GgufValue::of<uint32_t>(n_embd));
    m.set(arch + ".feed_forward_length", GgufValue::of<uint32_t>(4 * n_embd));
    m.set(arch + ".attention.head_count", GgufValue::of<uint32_t>(n_head));
    m.set(arch + ".attention.head_count_kv", GgufValue::of<uint32_t>(n_head / 2));
    m.set(arch + ".attention.key_length", GgufValue::of<uint32_t>(head_dim));
    m.set(arch + ".attention.value_length", GgufValue::of<uint32_t>(head_dim));
    return m;
}

std::string configure_error(const std::string& arch, const GgufMetadata& m) {
    try {
        find_architecture(arch).configure(m);
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(Gemma2Config, SlidingEvenLayersSoftCapsAndQueryScale) {
    GgufMetadata m = shape_metadata("gemma2", 26, 2304, 8, 256);
    m.set("gemma2.attention.sliding_window", GgufValue::of<uint32_t>(4096));
    m.set("gemma2.attn_logit_softcapping", GgufValue::of<float>(50.0f));
    m.set("gemma2.final_logit_softcapping", GgufValue::of<float>(30.0f));
    const ModelConfig c = gemma2_architecture().configure(m);
    ASSERT_EQ(c.layers.size(), 26u);
    for (std::size_t i = 0; i < c.layers.size(); ++i) {
        const LayerConfig& l = c.layers[i];
        EXPECT_EQ(l.attn_window, i % 2 == 0 ? 4096 : 0) << i;
        EXPECT_EQ(l.attn_softcap, 50.0f);
        EXPECT_EQ(l.attn_scaling, AttnScaling::kQuery);
        EXPECT_EQ(l.norms, NormPlacement::kPreAndPost);
        EXPECT_EQ(l.ffn_act, FfnActivation::kGeluTanh);
        EXPECT_EQ(l.rope.style, RopeStyle::kNeox);
        EXPECT_EQ(l.attn_scale, 1.0f / 16.0f);  // 1 / sqrt(256), the head size
    }
    EXPECT_EQ(c.final_softcap, 30.0f);
    EXPECT_FLOAT_EQ(c.embedding_scale, std::sqrt(2304.0f));
}

TEST(Gemma2Config, MissingKeysTakeLlamaCppsDefaults) {
    const ModelConfig c = gemma2_architecture().configure(shape_metadata("gemma2", 4, 64, 4, 16));
    EXPECT_EQ(c.layers[0].attn_window, 4096);
    EXPECT_EQ(c.layers[0].attn_softcap, 50.0f);
    EXPECT_EQ(c.final_softcap, 30.0f);
}

TEST(Gemma2Config, The46LayerModelScalesQueriesByEmbeddingPerHead) {
    // Gemma 2 27B: 4608 / 32 heads = 144, not the head size 128.
    const ModelConfig c =
        gemma2_architecture().configure(shape_metadata("gemma2", 46, 4608, 32, 128));
    EXPECT_EQ(c.layers[0].attn_scale, 1.0f / std::sqrt(144.0f));
    const ModelConfig other =
        gemma2_architecture().configure(shape_metadata("gemma2", 42, 3584, 16, 256));
    EXPECT_EQ(other.layers[0].attn_scale, 1.0f / 16.0f);
}

TEST(Gemma2Config, RejectsANonsenseSoftCap) {
    GgufMetadata m = shape_metadata("gemma2", 4, 64, 4, 16);
    m.set("gemma2.attn_logit_softcapping", GgufValue::of<float>(-1.0f));
    EXPECT_NE(configure_error("gemma2", m).find("'gemma2.attn_logit_softcapping' is -1"),
              std::string::npos)
        << configure_error("gemma2", m);
}

TEST(Gemma3Config, FiveSlidingLayersPerGlobalOneWithTheirOwnRope) {
    // Gemma 3 4B's keys: linear RoPE scaling by 8 on the global layers only.
    GgufMetadata m = shape_metadata("gemma3", 34, 2560, 8, 256);
    m.set("gemma3.attention.sliding_window", GgufValue::of<uint32_t>(1024));
    m.set("gemma3.rope.freq_base", GgufValue::of<float>(1000000.0f));
    m.set("gemma3.rope.scaling.type", GgufValue::string("linear"));
    m.set("gemma3.rope.scaling.factor", GgufValue::of<float>(8.0f));
    const ModelConfig c = gemma3_architecture().configure(m);
    for (std::size_t i = 0; i < c.layers.size(); ++i) {
        const LayerConfig& l = c.layers[i];
        const bool global = i % 6 == 5;
        EXPECT_EQ(l.attn_window, global ? 0 : 1024) << i;
        EXPECT_EQ(l.rope.freq_base, global ? 1000000.0f : 10000.0f) << i;
        EXPECT_EQ(l.rope.freq_scale, global ? 0.125f : 1.0f) << i;
        EXPECT_TRUE(l.qk_norm);
        EXPECT_EQ(l.norms, NormPlacement::kPreAndPost);
        EXPECT_EQ(l.attn_scaling, AttnScaling::kQuery);
        EXPECT_EQ(l.attn_softcap, 0.0f);
    }
    EXPECT_EQ(c.final_softcap, 0.0f);
}

TEST(Gemma3Config, The62LayerModelScalesQueriesByEmbeddingPerHead) {
    // Gemma 3 27B: 5376 / 32 heads = 168, not the head size 128.
    GgufMetadata m = shape_metadata("gemma3", 62, 5376, 32, 128);
    m.set("gemma3.attention.sliding_window", GgufValue::of<uint32_t>(1024));
    EXPECT_EQ(gemma3_architecture().configure(m).layers[0].attn_scale, 1.0f / std::sqrt(168.0f));
}

TEST(Gemma3Config, RequiresTheSlidingWindow) {
    EXPECT_NE(configure_error("gemma3", shape_metadata("gemma3", 6, 64, 4, 16))
                  .find("'gemma3.attention.sliding_window' is missing"),
              std::string::npos);
}

TEST(Phi3Config, LongRopeAttentionFactorFromTheKeyOrTheOriginalContext) {
    GgufMetadata m = shape_metadata("phi3", 4, 3072, 32, 96);
    m.set("phi3.attention.sliding_window", GgufValue::of<uint32_t>(262144));
    m.set("phi3.context_length", GgufValue::of<uint32_t>(131072));
    m.set("phi3.rope.scaling.original_context_length", GgufValue::of<uint32_t>(4096));
    // Derived as the converter and Hugging Face do: sqrt(1 + ln(131072 / 4096) / ln(4096)).
    ModelConfig c = phi3_architecture().configure(m);
    EXPECT_FLOAT_EQ(c.layers[0].rope.attn_factor,
                    static_cast<float>(std::sqrt(1.0 + std::log(32.0) / std::log(4096.0))));
    for (const LayerConfig& l : c.layers) {
        EXPECT_EQ(l.attn_window, 262144);
        EXPECT_EQ(l.qkv_layout, QkvLayout::kFused);
        EXPECT_EQ(l.gate_up_layout, GateUpLayout::kFused);
        EXPECT_EQ(l.attn_scaling, AttnScaling::kQuery);
        EXPECT_FLOAT_EQ(l.attn_scale, 1.0f / std::sqrt(96.0f));
    }
    // The file's own factor wins.
    m.set("phi3.rope.scaling.attn_factor", GgufValue::of<float>(1.1902f));
    EXPECT_EQ(phi3_architecture().configure(m).layers[0].rope.attn_factor, 1.1902f);
    // A context that is not extended: 1.
    GgufMetadata short_ctx = shape_metadata("phi3", 4, 3072, 32, 96);
    short_ctx.set("phi3.context_length", GgufValue::of<uint32_t>(4096));
    EXPECT_EQ(phi3_architecture().configure(short_ctx).layers[0].rope.attn_factor, 1.0f);
    // "longrope" as the scaling type is accepted (the factors do the scaling).
    m.set("phi3.rope.scaling.type", GgufValue::string("longrope"));
    EXPECT_EQ(phi3_architecture().configure(m).layers[0].rope.freq_scale, 1.0f);
}

TEST(ExpertConfig, CountsAreCheckedAndNamed) {
    GgufMetadata m = shape_metadata("llama", 2, 64, 4, 16);
    m.set("llama.expert_count", GgufValue::of<uint32_t>(8));
    m.set("llama.expert_used_count", GgufValue::of<uint32_t>(9));
    EXPECT_NE(configure_error("llama", m).find("'llama.expert_used_count' is 9, expected 1..8"),
              std::string::npos);
    m.remove("llama.expert_used_count");
    EXPECT_NE(configure_error("llama", m).find("'llama.expert_used_count' is missing"),
              std::string::npos);
    m.set("llama.expert_used_count", GgufValue::of<uint32_t>(2));
    const ModelConfig c = llama_architecture().configure(m);
    EXPECT_EQ(c.layers[1].n_expert, 8);
    EXPECT_EQ(c.layers[1].n_expert_used, 2);
    EXPECT_EQ(c.layers[1].n_ff, 256);  // feed_forward_length: Mixtral's width of one expert

    GgufMetadata q = shape_metadata("qwen3moe", 2, 64, 4, 16);
    EXPECT_NE(configure_error("qwen3moe", q).find("'qwen3moe.expert_count' is missing"),
              std::string::npos);
    q.set("qwen3moe.expert_count", GgufValue::of<uint32_t>(128));
    q.set("qwen3moe.expert_used_count", GgufValue::of<uint32_t>(8));
    q.set("qwen3moe.expert_feed_forward_length", GgufValue::of<uint32_t>(48));
    const ModelConfig qc = qwen3moe_architecture().configure(q);
    EXPECT_EQ(qc.layers[0].n_ff, 48);
    EXPECT_TRUE(qc.layers[0].qk_norm);
}

// A copy of a fixture model with metadata changed and tensors added.
void write_copy(const std::filesystem::path& in, const std::filesystem::path& out,
                const std::function<void(GgufWriter&)>& change) {
    const GgufFile file = GgufFile::open(in);
    GgufWriter w;
    for (const auto& e : file.metadata().entries()) w.metadata().set(e.key, e.value);
    for (const TensorInfo* t : file.tensors()) {
        std::vector<int64_t> shape(t->ne.begin(), t->ne.begin() + t->n_dims);
        w.add_tensor(t->name, t->type, shape, [t](std::span<std::byte> bytes) {
            std::memcpy(bytes.data(), t->data.data(), bytes.size());
        });
    }
    change(w);
    w.write_file(out);
}

void add_f32_vector(GgufWriter& w, const std::string& name, std::vector<float> values) {
    w.add_tensor(name, GgmlType::F32, {static_cast<int64_t>(values.size())},
                 [values](std::span<std::byte> bytes) {
                     std::memcpy(bytes.data(), values.data(), bytes.size());
                 });
}

// The weight the first RoPE op of a graph for sequences of n_ctx positions uses.
std::string rope_factors_of(const Model& model, int64_t n_ctx) {
    const Graph g = test::one_token_graph(model, n_ctx);
    for (const Op& op : g.ops) {
        if (op.type == OpType::Rope)
            return op.weight != nullptr && *op.weight ? op.weight->name() : "none";
    }
    return "no rope op";
}

TEST(Phi3Config, LongFactorsOnlyForAContextBeyondTheOriginal) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-phi3-f16.gguf");
    test::TempDir dir;
    write_copy(path, dir / "longrope.gguf", [](GgufWriter& w) {
        w.metadata().set("phi3.rope.scaling.original_context_length",
                         GgufValue::of<uint32_t>(1024));
        add_f32_vector(w, "rope_factors_long.weight", std::vector<float>(16, 4.0f));
        add_f32_vector(w, "rope_factors_short.weight", std::vector<float>(16, 1.5f));
    });
    const auto model = Model::load(dir / "longrope.gguf");
    EXPECT_EQ(rope_factors_of(*model, 1024), "rope_factors_short.weight");
    EXPECT_EQ(rope_factors_of(*model, 1025), "rope_factors_long.weight");
    EXPECT_FLOAT_EQ(model->layers()[0].rope.attn_factor,
                    static_cast<float>(std::sqrt(1.0 + std::log(4.0) / std::log(1024.0))));

    // One factor without the other is a file error naming the missing tensor.
    write_copy(path, dir / "half.gguf", [](GgufWriter& w) {
        add_f32_vector(w, "rope_factors_long.weight", std::vector<float>(16, 4.0f));
    });
    try {
        Model::load(dir / "half.gguf");
        ADD_FAILURE() << "loaded a model with long factors only";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("tensor 'rope_factors_short.weight' is missing"),
                  std::string::npos)
            << e.what();
    }
}

TEST(ExpertTensors, ShapesAreCheckedAndOnlyTheUsedExpertsCountAsRead) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-mixtral-q8_0.gguf");
    const auto model = Model::load(path);
    // Every tensor once, except the expert tensors (2 of 4 experts) and the embedding table (one
    // row).
    uint64_t expected = 0;
    for (const TensorInfo* t : model->file().tensors()) {
        if (t->name.find("_exps.") != std::string::npos) {
            expected += t->n_bytes / 4 * 2;
        } else if (t->name == "token_embd.weight") {
            expected += t->n_bytes / static_cast<uint64_t>(t->ne[1]);
        } else {
            expected += t->n_bytes;
        }
    }
    EXPECT_EQ(model->bytes_per_token(), expected);

    test::TempDir dir;
    write_copy(path, dir / "bad.gguf", [](GgufWriter& w) {
        w.metadata().set("llama.expert_count", GgufValue::of<uint32_t>(8));
    });
    try {
        Model::load(dir / "bad.gguf");
        ADD_FAILURE() << "loaded 4 experts as 8";
    } catch (const FormatError& e) {
        EXPECT_NE(std::string(e.what()).find("tensor 'blk.0.ffn_gate_inp.weight' has shape "
                                             "[256, 4], expected [256, 8]"),
                  std::string::npos)
            << e.what();
    }
}

}  // namespace
}  // namespace minfer
