// -ngl's split forward pass (backend/split_backend.h): the graph cut at a layer boundary, each part
// run by its own backend with its own cache layers, the residual stream carried across.
// - split_graph: where it cuts, what it carries, the back's cache layers renumbered, refusals;
//   carried rows that do not fit their buffer are refused by the graph's validation;
// - a pass split between two CPU backends (or two reference backends) gives the bits of one
//   backend, on every fixture model at its middle layer and on one model at every layer
//   boundary, prompts in micro-batches; sequences batched together with a shared prefix (copy on
//   write in both parts) get the bits they get unsplit.
// The split with the Vulkan backend behind the CPU (what -ngl builds) is in tests/backend/vulkan.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend/reference/reference_backend.h"
#include "backend/split_backend.h"
#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "core/error.h"
#include "model/model.h"

namespace minfer {
namespace {

TEST(SplitGraph, CutsBeforeTheLayerAndCarriesTheResidualStream) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-llama-q8_0.gguf");
    const auto model = Model::load(path);
    const int n_layers = static_cast<int>(model->hparams().n_layer);
    ASSERT_GE(n_layers, 2);
    const Graph g = test::one_token_graph(*model);
    SplitGraphs parts = split_graph(g, 1);

    ASSERT_EQ(parts.front.ops.size() + parts.back.ops.size(), g.ops.size());
    EXPECT_EQ(parts.front.ops.front().type, OpType::GetRows);
    for (const Op& op : parts.front.ops) EXPECT_LT(op.layer, 1) << op_name(op);
    EXPECT_EQ(parts.back.ops.front().layer, 1);
    for (const Op& op : parts.back.ops) {
        if (op.type == OpType::StoreKv || op.type == OpType::Attention) {
            EXPECT_EQ(op.kv_layer, op.layer - 1) << op_name(op);
        }
    }
    EXPECT_EQ(parts.front.logits, kNoBuffer);
    EXPECT_EQ(parts.back.logits, g.logits);
    ASSERT_EQ(parts.back.carried_in.size(), 1u);
    const CarriedRows& carried = parts.back.carried_in[0];
    const BufferDecl& residual = g.buffers[static_cast<std::size_t>(carried.buffer)];
    EXPECT_STREQ(residual.name, "residual");
    EXPECT_EQ(carried.rows, 1);
    // The logits are the back's alone: the front declares them with no rows.
    EXPECT_EQ(parts.front.buffers[static_cast<std::size_t>(g.logits)].rows, 0);

    // Each part validates once the carried rows are there; rows that do not fit are refused.
    const int64_t n_vocab = model->hparams().n_vocab, slots = kKvBlockSize;
    EXPECT_NO_THROW(parts.front.validate(n_vocab, slots));
    EXPECT_THROW(parts.back.validate(n_vocab, slots), UsageError);  // nothing carried yet
    parts.back.carried_in[0].values.assign(static_cast<std::size_t>(residual.width), 0.5f);
    EXPECT_NO_THROW(parts.back.validate(n_vocab, slots));
    parts.back.carried_in[0].values.push_back(0.5f);
    try {
        parts.back.validate(n_vocab, slots);
        ADD_FAILURE() << "carried rows longer than their buffer were accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("the rows carried into 'residual' do not fit it"),
                  std::string::npos)
            << e.what();
    }

    // The last layer is a cut; layer 0 (nothing before it) and past the last are not.
    EXPECT_EQ(split_graph(g, n_layers - 1).back.ops.front().layer, n_layers - 1);
    EXPECT_THROW(split_graph(g, 0), UsageError);
    EXPECT_THROW(split_graph(g, n_layers), UsageError);
    // A buffer no declaration names is refused before the parts index it.
    Graph bad = g;
    bad.ops.back().src0 = 999;
    try {
        split_graph(bad, 1);
        ADD_FAILURE() << "an undeclared buffer was accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("buffer 999 is not declared"), std::string::npos)
            << e.what();
    }
}

TEST(SplitGraph, GivesEachBackendTheCacheLayersOfItsPart) {
    BackendOptions o;
    o.kv.layers = {KvLayerShape{1, 8, 8}, KvLayerShape{2, 8, 8}, KvLayerShape{3, 8, 8}};
    ASSERT_EQ(front_options(o, 1).kv.layers.size(), 1u);
    EXPECT_EQ(front_options(o, 1).kv.layers[0].n_head_kv, 1);
    ASSERT_EQ(back_options(o, 1).kv.layers.size(), 2u);
    EXPECT_EQ(back_options(o, 1).kv.layers[0].n_head_kv, 2);
    EXPECT_EQ(back_options(o, 1).kv.layers[1].n_head_kv, 3);
}

enum class Pair { kCpu, kReference };

// 2 threads, micro-batches of 7; the pass split before layer `first_back_layer` (0: unsplit).
EngineOptions engine_options(Pair pair, int first_back_layer) {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 512;
    o.n_batch = 7;
    o.make_backend = [pair, first_back_layer](const BackendOptions& b,
                                              ThreadPool& pool) -> std::unique_ptr<Backend> {
        const auto make = [&](const BackendOptions& options) {
            return pair == Pair::kCpu ? make_cpu_backend(options, pool)
                                      : make_reference_backend(options);
        };
        if (first_back_layer == 0) return make(b);
        return make_split_backend(make(front_options(b, first_back_layer)),
                                  make(back_options(b, first_back_layer)), first_back_layer);
    };
    return o;
}

// The first 40 tokens of the model's vocabulary walk (a prompt of several micro-batches).
std::vector<int32_t> some_tokens(const Model& model) {
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 40; ++i)
        tokens.push_back(static_cast<int32_t>((i * 7 + 3) % model.hparams().n_vocab));
    return tokens;
}

void expect_split_matches_unsplit(const std::string& model_file, Pair pair,
                                  const std::vector<int>& cuts) {
    MINFER_REQUIRE_FIXTURE(path, "models/" + model_file);
    auto whole = test::make_engine(path, engine_options(pair, 0));
    const std::vector<int32_t> tokens = some_tokens(*whole.model.model);
    const test::LogitRows expected = test::evaluate_all(*whole.engine, tokens);
    for (int cut : cuts) {
        auto split = test::make_engine(path, engine_options(pair, cut));
        ASSERT_EQ(split.engine->backend().name(), "split");
        const test::LogitRows rows = test::evaluate_all(*split.engine, tokens);
        ASSERT_EQ(rows.size(), expected.size());
        for (std::size_t i = 0; i < rows.size(); ++i)
            ASSERT_EQ(rows[i], expected[i])
                << model_file << " split at " << cut << ", position " << i;
    }
}

class SplitPass : public testing::TestWithParam<std::string> {};

TEST_P(SplitPass, GivesTheBitsOfOneCpuBackend) {
    MINFER_REQUIRE_FIXTURE(path, "models/" + GetParam());
    const auto model = Model::load(path);
    const int n_layers = static_cast<int>(model->hparams().n_layer);
    ASSERT_GE(n_layers, 2);
    expect_split_matches_unsplit(GetParam(), Pair::kCpu, {n_layers / 2});
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SplitPass, testing::ValuesIn(test::engine_fixture_models()),
                         [](const testing::TestParamInfo<std::string>& p) {
                             std::string name = p.param.substr(0, p.param.rfind('.'));
                             for (char& c : name) {
                                 if (c == '-' || c == '.') c = '_';
                             }
                             return name;
                         });

TEST(SplitPassEveryCut, GivesTheBitsOfOneBackendAtEveryLayerBoundary) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-qwen3moe-q8_0.gguf");
    const auto model = Model::load(path);
    std::vector<int> cuts;
    for (int i = 1; i < static_cast<int>(model->hparams().n_layer); ++i) cuts.push_back(i);
    expect_split_matches_unsplit("tiny-qwen3moe-q8_0.gguf", Pair::kCpu, cuts);
    expect_split_matches_unsplit("tiny-gemma2-q8_0.gguf", Pair::kReference, {1});
}

TEST(SplitPassBatched, SequencesSharingAPrefixGetTheirUnsplitBits) {
    MINFER_REQUIRE_FIXTURE(path, "models/tiny-llama-q8_0.gguf");
    auto whole = test::make_engine(path, engine_options(Pair::kCpu, 0));
    auto split = test::make_engine(path, engine_options(Pair::kCpu, 1));
    const std::vector<int32_t> text = some_tokens(*whole.model.model);
    // Prompts of 20, 20 and 33 tokens share their first 20 (a shared block, copied on write by
    // the sequences that go on from it), then each decodes 8 tokens.
    const test::BatchedRun expected = test::run_together(*whole.engine, text, {20, 20, 33}, 8);
    const test::BatchedRun got = test::run_together(*split.engine, text, {20, 20, 33}, 8);
    ASSERT_LT(got.steps, test::BatchedRun::kMaxSteps);
    EXPECT_EQ(got.evaluated, expected.evaluated);
    EXPECT_EQ(got.rows, expected.rows);
}

}  // namespace
}  // namespace minfer
