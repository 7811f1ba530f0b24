// Loading a model: architecture dispatch, hyperparameters with defaults and validation, weights
// bound by name with shape and type checks, tied output, zero-copy views.

#include <gtest/gtest.h>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "common/tiny_model.h"
#include "core/error.h"
#include "model/model.h"

namespace minfer {
namespace {

using test::TinyModelSpec;

std::string load_error(const TinyModelSpec& spec) {
    test::TempDir dir;
    write_tiny_model(dir / "m.gguf", spec);
    try {
        Model::load(dir / "m.gguf");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

void expect_load_error(const TinyModelSpec& spec, const std::string& text) {
    const std::string msg = load_error(spec);
    EXPECT_FALSE(msg.empty()) << "expected an error containing: " << text;
    EXPECT_NE(msg.find(text), std::string::npos) << "message: " << msg;
}

TinyModelSpec spec_with(const std::function<void(TinyModelSpec&)>& change) {
    TinyModelSpec s;
    change(s);
    return s;
}

std::shared_ptr<const Model> load(const TinyModelSpec& spec, const test::TempDir& dir) {
    write_tiny_model(dir / "m.gguf", spec);
    return Model::load(dir / "m.gguf");
}

// The op of that name in a graph.
const Op& find_op(const Graph& g, int layer, std::string_view label) {
    for (const Op& op : g.ops) {
        if (op.layer == layer && op.label == label) return op;
    }
    throw std::runtime_error(concat("no op ", label, " in layer ", layer));
}

// Bytes of every tensor of the file, and of the embedding table.
std::pair<uint64_t, uint64_t> tensor_bytes(const Model& model) {
    uint64_t all = 0;
    for (const TensorInfo* t : model.file().tensors()) all += t->n_bytes;
    return {all, model.file().tensor("token_embd.weight").n_bytes};
}

TEST(ModelLoad, TinyLlamaWithDefaults) {
    test::TempDir dir;
    auto model = load({}, dir);
    const HParams& hp = model->hparams();
    EXPECT_EQ(hp.architecture, "llama");
    EXPECT_EQ(hp.n_layer, 2);
    EXPECT_EQ(hp.head_dim_k, 16);  // embedding / heads
    EXPECT_EQ(hp.n_rot, 16);       // head size
    EXPECT_EQ(hp.rope_freq_base, 10000.0f);
    EXPECT_EQ(hp.rope_freq_scale, 1.0f);
    EXPECT_EQ(hp.n_vocab, 128);
    const Graph g = test::one_token_graph(*model);
    EXPECT_EQ(find_op(g, -1, "output").weight->name(), "output.weight");
    // Weights view the mapping: the data pointer lies inside the mapped file.
    const auto& file = model->file().parts().front().bytes;
    const auto* p = find_op(g, 1, "ffn_down").weight->data.data();
    EXPECT_GE(p, file.data());
    EXPECT_LT(p, file.data() + file.size());
    // Read per token: every tensor, but only one row of the embedding table (128 tokens).
    const auto [all, embd] = tensor_bytes(*model);
    EXPECT_EQ(model->bytes_per_token(), all - embd + embd / 128);
}

TEST(ModelLoad, TiedOutputUsesTheEmbedding) {
    test::TempDir dir;
    auto model = load(spec_with([](TinyModelSpec& s) { s.tied_output = true; }), dir);
    const Graph g = test::one_token_graph(*model);
    EXPECT_EQ(find_op(g, -1, "output").weight->info, find_op(g, -1, "token_embd").weight->info);
    // The tied output reads the whole embedding table per token.
    EXPECT_EQ(model->bytes_per_token(), tensor_bytes(*model).first);
}

TEST(ModelLoad, UnknownArchitectureListsTheSupportedOnes) {
    expect_load_error(spec_with([](TinyModelSpec& s) { s.architecture = "gemma"; }),
                      "architecture 'gemma' is not supported (supported: llama, qwen2, qwen3, "
                      "qwen3moe, gemma2, gemma3, phi3)");
}

TEST(ModelLoad, MissingRequiredKey) {
    expect_load_error(spec_with([](TinyModelSpec& s) { s.skip_keys = {"llama.block_count"}; }),
                      "metadata key 'llama.block_count' is missing");
    expect_load_error(spec_with([](TinyModelSpec& s) { s.skip_keys = {"general.architecture"}; }),
                      "'general.architecture' is missing");
}

TEST(ModelLoad, HeadsNotDivisibleByKvHeads) {
    expect_load_error(spec_with([](TinyModelSpec& s) { s.n_head_kv = 3; }),
                      "4 attention heads are not divisible by 3 KV heads");
}

TEST(ModelLoad, KeyOutOfRange) {
    expect_load_error(spec_with([](TinyModelSpec& s) {
                          s.customize = [](GgufWriter& w) {
                              w.metadata().set("llama.rope.dimension_count",
                                               GgufValue::of<uint32_t>(64));
                          };
                      }),
                      "'llama.rope.dimension_count' is 64, expected 0..16");
    expect_load_error(spec_with([](TinyModelSpec& s) {
                          s.customize = [](GgufWriter& w) {
                              w.metadata().set("llama.block_count", GgufValue::of<int32_t>(-1));
                          };
                      }),
                      "'llama.block_count' is -1");
}

TEST(ModelLoad, UnsupportedRopeScaling) {
    expect_load_error(spec_with([](TinyModelSpec& s) {
                          s.customize = [](GgufWriter& w) {
                              w.metadata().set("llama.rope.scaling.type",
                                               GgufValue::string("yarn"));
                          };
                      }),
                      "RoPE scaling type 'yarn' is not supported yet");
}

TEST(ModelLoad, LinearRopeScaling) {
    test::TempDir dir;
    auto model =
        load(spec_with([](TinyModelSpec& s) {
                 s.customize = [](GgufWriter& w) {
                     w.metadata().set("llama.rope.scaling.type", GgufValue::string("linear"));
                     w.metadata().set("llama.rope.scaling.factor", GgufValue::of<float>(4.0f));
                 };
             }),
             dir);
    EXPECT_EQ(model->hparams().rope_freq_scale, 0.25f);
}

TEST(ModelLoad, MissingTensorNamesItAndItsShape) {
    expect_load_error(spec_with([](TinyModelSpec& s) { s.skip_tensors = {"blk.1.ffn_up.weight"}; }),
                      "tensor 'blk.1.ffn_up.weight' is missing (expected shape [64, 96])");
    expect_load_error(spec_with([](TinyModelSpec& s) { s.architecture = "qwen2"; }),
                      "tensor 'blk.0.attn_q.bias' is missing");
    expect_load_error(spec_with([](TinyModelSpec& s) { s.architecture = "qwen3"; }),
                      "tensor 'blk.0.attn_q_norm.weight' is missing");
}

TEST(ModelLoad, ExtraTensorsAreIgnored) {
    EXPECT_EQ(load_error(spec_with([](TinyModelSpec& s) {
                  s.customize = [](GgufWriter& w) {
                      static std::vector<float> data(64 * 64);
                      w.add_tensor("blk.5.unused", GgmlType::F32, {64, 64},
                                   std::as_bytes(std::span(data)));
                  };
              })),
              "");
}

TEST(ModelLoad, WronglyShapedTensor) {
    expect_load_error(spec_with([](TinyModelSpec& s) {
                          s.skip_tensors = {"blk.0.attn_k.weight"};
                          s.customize = [](GgufWriter& w) {
                              static std::vector<float> data(64 * 64);
                              w.add_tensor("blk.0.attn_k.weight", GgmlType::F32, {64, 64},
                                           std::as_bytes(std::span(data)));
                          };
                      }),
                      "tensor 'blk.0.attn_k.weight' has shape [64, 64], expected [64, 32]");
}

TEST(ModelLoad, NormThatIsNotF32) {
    expect_load_error(spec_with([](TinyModelSpec& s) {
                          s.skip_tensors = {"output_norm.weight"};
                          s.customize = [](GgufWriter& w) {
                              static std::vector<uint16_t> data(64);
                              w.add_tensor("output_norm.weight", GgmlType::F16, {64},
                                           std::as_bytes(std::span(data)));
                          };
                      }),
                      "tensor 'output_norm.weight' has type f16; minfer expects f32");
}

TEST(ModelLoad, UnsupportedWeightTypeIsNamed) {
    // IQ2_XXS blocks hold 256 values in 66 bytes.
    expect_load_error(
        spec_with([](TinyModelSpec& s) {
            s.n_embd = 256;
            s.n_ff = 256;
            s.skip_tensors = {"blk.1.ffn_down.weight"};
            s.customize = [](GgufWriter& w) {
                static std::vector<std::byte> data(66 * 256);
                w.add_tensor("blk.1.ffn_down.weight", GgmlType::IQ2_XXS, {256, 256}, data);
            };
        }),
        "blk.1.ffn_down.weight has type iq2_xxs, which minfer does not support yet");
}

TEST(ModelLoad, QwenVariantsLoad) {
    test::TempDir dir;
    write_tiny_model(dir / "q2.gguf", spec_with([](TinyModelSpec& s) {
                         s.architecture = "qwen2";
                         s.qkv_bias = true;
                     }));
    write_tiny_model(dir / "q3.gguf", spec_with([](TinyModelSpec& s) {
                         s.architecture = "qwen3";
                         s.qk_norm = true;
                     }));
    const auto q2 = Model::load(dir / "q2.gguf");
    EXPECT_EQ(q2->layers().front().rope.style, RopeStyle::kNeox);
    EXPECT_TRUE(q2->layers().front().qkv_bias);
    EXPECT_TRUE(Model::load(dir / "q3.gguf")->layers().back().qk_norm);
}

TEST(ModelLoad, VocabularyOnlyFileIsNotAModel) {
    MINFER_REQUIRE_FIXTURE(path, "vocab/ggml-vocab-gpt-2.gguf");
    try {
        Model::load(path);
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("has no tensors"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace minfer

namespace minfer {
namespace {

// Graph::validate refuses what a backend would trip over inside its threads (where an exception
// would leave the other threads waiting at a barrier): every check below once reached a kernel.
TEST(GraphValidate, RefusesWhatABackendCannotRun) {
    test::TempDir dir;
    const auto model = load(TinyModelSpec{}, dir);
    const int64_t n_vocab = model->hparams().n_vocab, n_slots = kKvBlockSize;
    EXPECT_NO_THROW(test::one_token_graph(*model).validate(n_vocab, n_slots));
    const auto expect_refused = [&](const std::function<void(Graph&)>& change,
                                    const std::string& text) {
        Graph g = test::one_token_graph(*model);
        change(g);
        try {
            g.validate(n_vocab, n_slots);
            ADD_FAILURE() << "accepted; expected: " << text;
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
        }
    };
    const auto op_named = [](Graph& g, std::string_view label) -> Op& {
        for (Op& op : g.ops) {
            if (op.layer == 0 && op.label == label) return op;
        }
        throw std::runtime_error("no such op");
    };
    expect_refused([&](Graph& g) { op_named(g, "rope_q").rope.n_dims = 0; }, "bad RoPE dimensions");
    expect_refused([&](Graph& g) { op_named(g, "rope_k").rope.freq_base = 0; },
                   "bad RoPE frequencies");
    // A norm weight must be an f32 vector of the row width (here: a projection matrix).
    expect_refused(
        [&](Graph& g) { op_named(g, "attn_norm").weight = op_named(g, "attn_q").weight; },
        "attn_norm");
    expect_refused([&](Graph& g) { g.in.tokens[0] = static_cast<int32_t>(n_vocab); },
                   "out of range");
    expect_refused([&](Graph& g) { g.in.kv_slots[0] = 3; }, "stores at slot 3");
    expect_refused([&](Graph& g) { g.in.table_blocks[0] = 1; }, "outside the cache");
    expect_refused([&](Graph& g) { op_named(g, "attention").attn.n_head_kv = 3; },
                   "bad attention shape");
    expect_refused([&](Graph& g) { op_named(g, "attn_q").src0 = 99; }, "is not declared");
    // What the op definitions (model/op_def.h) add: every operand as its definition says.
    expect_refused([&](Graph& g) { op_named(g, "attn_q").src0 = op_named(g, "attention").dst; },
                   "reads input 'attn_out' before an op writes it");
    expect_refused(
        [&](Graph& g) {
            g.buffers.push_back(BufferDecl{"ids", g.in.n_tokens(), 64, DType::kI32});
            op_named(g, "attn_norm").src0 = static_cast<BufferId>(g.buffers.size() - 1);
        },
        "input 'ids' holds i32, needs f32");
    expect_refused([&](Graph& g) { op_named(g, "attn_q").src1 = 0; },
                   "names a buffer it does not use");
    expect_refused(
        [&](Graph& g) { op_named(g, "attention").weight = op_named(g, "attn_q").weight; },
        "takes no weight");
}

}  // namespace
}  // namespace minfer
