// The Vulkan backend (backend/vulkan/vulkan_backend.h) through the engine, on the machine's Vulkan
// device (lavapipe in CI; MINFER_VULKAN_DEVICE=N picks another), with the Khronos validation
// layer on and required silent:
// - every golden fixture model agrees with llama.cpp's logits within the golden tolerance, as the
//   CPU backend must (prompts in micro-batches of 7 through the paged cache; f16, f32 and q8_0
//   caches);
// - a forward pass is one queue submission and one host wait, and uploads no weight after load;
// - sequences batched together get bit for bit the logits each gets alone, and a continued
//   sequence whose shared block is copied on write (copy_kv_block) gets what it gets from scratch;
// - what it cannot do is refused with a clear error (a q8_0 cache of odd rows, a device without
//   room).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "backend/vulkan/vulkan_backend.h"
#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_devices.h"
#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "common/golden.h"
#include "common/golden_parity.h"
#include "core/error.h"

namespace minfer {
namespace {

int device_index() {
    const char* n = std::getenv("MINFER_VULKAN_DEVICE");
    return n != nullptr ? std::atoi(n) : 0;
}

EngineOptions vulkan_options(GgmlType kv_type = GgmlType::F16, int64_t n_batch = 7,
                             int64_t kv_tokens = 0) {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 512;
    o.n_batch = n_batch;
    o.kv_tokens = kv_tokens;
    o.kv_type = kv_type;
    o.device = DeviceChoice{DeviceKind::kVulkan, device_index()};
    return o;
}

class VulkanEngine : public testing::Test {
  protected:
    void SetUp() override {
        setenv("MINFER_VULKAN_VALIDATION", "1", /*overwrite=*/0);
        const VulkanDeviceList list = list_vulkan_devices();
        if (list.devices.empty()) {
            if (test::in_ci()) FAIL() << "no Vulkan device in CI: " << list.unavailable;
            GTEST_SKIP() << "no Vulkan device: " << list.unavailable;
        }
    }
    // The validation layer's findings of the backend `engine` runs on, none expected.
    static void expect_no_validation_errors(const Engine& engine) {
        const auto transfers = engine.backend().device_transfers();
        ASSERT_TRUE(transfers.has_value());
        EXPECT_EQ(transfers->validation_errors, 0) << transfers->first_validation_error;
    }
};

struct ParityParam {
    std::string golden;
    GgmlType kv_type = GgmlType::F16;
    std::size_t max_cases = 0;  // 0: all
};

class VulkanParity : public VulkanEngine, public testing::WithParamInterface<ParityParam> {};

TEST_P(VulkanParity, AgreesWithTheGolden) {
    const ParityParam& p = GetParam();
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + p.golden);
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    auto t = test::make_engine(model_path, vulkan_options(p.kv_type));
    ASSERT_EQ(t.engine->backend().name(), "vulkan");
    // The golden files were made with an f16 cache: a q8_0 cache may deviate twice as far.
    const double tolerance = golden.tolerance() * (p.kv_type == GgmlType::Q8_0 ? 2.0 : 1.0);
    const test::ParityFigures f =
        test::check_golden_parity(*t.engine, golden, tolerance, p.max_cases);
    expect_no_validation_errors(*t.engine);
    std::printf("vulkan %-24s kv %-4s %s\n", golden.model.c_str(),
                std::string(type_name(p.kv_type)).c_str(), f.summary().c_str());
}

std::vector<ParityParam> parity_params() {
    std::vector<ParityParam> params;
    for (const std::string& f : test::kRunnableGoldenFiles) params.push_back({f});
    params.push_back({"tiny-llama-f16.json", GgmlType::F32, 2});
    params.push_back({"tiny-gemma3-q8_0.json", GgmlType::F32, 2});
    params.push_back({"tiny-qwen3moe-q8_0.json", GgmlType::F32, 2});
    for (const char* f : {"tiny-llama-q8_0.json", "tiny-qwen3-q8_0.json", "tiny-phi3-q8_0.json",
                          "tiny-mixtral-q8_0.json"})
        params.push_back({f, GgmlType::Q8_0});
    return params;
}

INSTANTIATE_TEST_SUITE_P(Golden, VulkanParity, testing::ValuesIn(parity_params()),
                         [](const testing::TestParamInfo<ParityParam>& p) {
                             std::string name = test::golden_name(p.param.golden);
                             if (p.param.kv_type != GgmlType::F16)
                                 name += "_kv" + std::string(type_name(p.param.kv_type));
                             return name;
                         });

// The GPUs' products (a row per workgroup) on this device too, where lavapipe's own are a row per
// invocation: a dense model of K-quants, and a mixture of experts.
TEST_F(VulkanEngine, GpuProductsAgreeWithTheGolden) {
    setenv("MINFER_VULKAN_PRODUCTS", "workgroup", 1);
    for (const char* file : {"tiny-llama-q4_k_m.json", "tiny-qwen3moe-q8_0.json"}) {
        SCOPED_TRACE(file);
        MINFER_REQUIRE_FIXTURE(golden_path, std::string("golden/") + file);
        const test::Golden golden = test::load_golden(golden_path);
        MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
        auto t = test::make_engine(model_path, vulkan_options(GgmlType::F16, 32));
        const test::ParityFigures f =
            test::check_golden_parity(*t.engine, golden, golden.tolerance());
        expect_no_validation_errors(*t.engine);
        std::printf("vulkan workgroup products %-24s %s\n", golden.model.c_str(),
                    f.summary().c_str());
    }
    unsetenv("MINFER_VULKAN_PRODUCTS");
}

// After the engine's start (weights uploaded by prepare), each forward pass is one submission and
// one host wait; what goes up is the batch's inputs, never a weight.
TEST_F(VulkanEngine, OneSubmissionPerForwardPassAndNoWeightUploads) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-qwen2-q8_0.gguf");
    auto t = test::make_engine(model_path, vulkan_options(GgmlType::F16, 512));
    const DeviceTransfers start = *t.engine->backend().device_transfers();
    EXPECT_GT(start.weight_bytes_up + start.weight_bytes_imported, 0u);
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
    test::evaluate_all(*t.engine, prompt);  // one pass of 8 tokens
    const DeviceTransfers end = *t.engine->backend().device_transfers();
    EXPECT_EQ(end.submissions - start.submissions, 1u);
    EXPECT_EQ(end.host_waits - start.host_waits, 1u);
    EXPECT_EQ(end.weight_bytes_up, start.weight_bytes_up);
    EXPECT_EQ(end.weight_bytes_imported, start.weight_bytes_imported);
    // The logits of 8 rows read back; the inputs are a few hundred bytes.
    EXPECT_EQ(end.bytes_down - start.bytes_down, 8u * t.model.model->hparams().n_vocab * 4);
    EXPECT_LT(end.bytes_up - start.bytes_up, 4096u);
    expect_no_validation_errors(*t.engine);
}

// Decoding a token at a time, each pass has the commands of the one before (the inputs' values
// differ, in their buffer): the pass recorded for the first step is submitted again for the
// others, and gives the logits of passes recorded anew (a traced engine records every pass).
TEST_F(VulkanEngine, DecodeStepsSubmitTheFirstStepsRecordedPassAgain) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-llama-q8_0.gguf");
    std::vector<int32_t> tokens(40);
    for (int32_t i = 0; i < 40; ++i) tokens[static_cast<std::size_t>(i)] = 1 + i * 7;
    auto reused = test::make_engine(model_path, vulkan_options(GgmlType::F16, 1));
    const DeviceTransfers start = *reused.engine->backend().device_transfers();
    const test::LogitRows rows = test::evaluate_all(*reused.engine, tokens);
    const DeviceTransfers end = *reused.engine->backend().device_transfers();
    EXPECT_EQ(end.submissions - start.submissions, tokens.size());
    EXPECT_EQ(end.recordings - start.recordings, 1u);
    EngineOptions traced_options = vulkan_options(GgmlType::F16, 1);
    traced_options.trace = [](const Op&, double) {};
    auto traced = test::make_engine(model_path, traced_options);
    const DeviceTransfers traced_start = *traced.engine->backend().device_transfers();
    EXPECT_EQ(test::evaluate_all(*traced.engine, tokens), rows);
    EXPECT_EQ(traced.engine->backend().device_transfers()->recordings - traced_start.recordings,
              tokens.size());
    expect_no_validation_errors(*reused.engine);
}

// -ngl 1: every layer but the last on the CPU, the last and the output on the device. Within the
// golden tolerance as the whole pass on either is; each pass still one submission, one wait, no
// weight uploads, and what goes up beside the inputs is the residual stream the CPU hands over.
class VulkanSplitParity : public VulkanEngine, public testing::WithParamInterface<std::string> {};

TEST_P(VulkanSplitParity, AgreesWithTheGolden) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/" + GetParam());
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    EngineOptions options = vulkan_options();
    options.device.gpu_layers = 1;
    auto t = test::make_engine(model_path, options);
    ASSERT_EQ(t.engine->backend().name(), "split");
    const test::ParityFigures f =
        test::check_golden_parity(*t.engine, golden, golden.tolerance(), /*max_cases=*/2);
    expect_no_validation_errors(*t.engine);
    std::printf("vulkan -ngl 1 %-24s %s\n", golden.model.c_str(), f.summary().c_str());

    const DeviceTransfers start = *t.engine->backend().device_transfers();
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
    test::evaluate_all(*t.engine, prompt);  // one pass of 7 tokens
    const DeviceTransfers end = *t.engine->backend().device_transfers();
    EXPECT_EQ(end.submissions - start.submissions, 1u);
    EXPECT_EQ(end.host_waits - start.host_waits, 1u);
    EXPECT_EQ(end.weight_bytes_up, start.weight_bytes_up);
    const uint64_t residual = 7u * static_cast<uint64_t>(t.model.model->hparams().n_embd) * 4;
    EXPECT_GE(end.bytes_up - start.bytes_up, residual);
    EXPECT_LT(end.bytes_up - start.bytes_up, residual + 4096u);
}

INSTANTIATE_TEST_SUITE_P(Golden, VulkanSplitParity,
                         testing::Values("tiny-llama-q8_0.json", "tiny-gemma2-q8_0.json",
                                         "tiny-phi3-q8_0.json", "tiny-qwen3moe-q8_0.json"),
                         [](const testing::TestParamInfo<std::string>& p) {
                             return test::golden_name(p.param);
                         });

// An engine that ends returns every byte of device memory it took (weights, cache, activations),
// split or not, its weights copied or imported: a server that unloads models does not grow on
// the device.
TEST_F(VulkanEngine, ReturnsItsDeviceMemoryWhenItEnds) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-qwen2-q8_0.gguf");
    const auto context = vulkan::Context::open(device_index());
    const uint64_t before = context->device_bytes();
    for (const char* import : {"0", "1"}) {
        setenv("MINFER_VULKAN_IMPORT", import, 1);
        for (int gpu_layers : {-1, 1}) {
            EngineOptions options = vulkan_options();
            options.device.gpu_layers = gpu_layers;
            auto t = test::make_engine(model_path, options);
            test::evaluate_all(*t.engine, {1, 2, 3, 4, 5});
            EXPECT_GT(context->device_bytes(), before) << "-ngl " << gpu_layers;
            t.engine.reset();
            EXPECT_EQ(context->device_bytes(), before) << "-ngl " << gpu_layers;
        }
    }
    unsetenv("MINFER_VULKAN_IMPORT");
}

// On a device that reads host memory as its own (lavapipe; integrated GPUs), the weights are the
// mapped file's pages imported in place: no byte uploaded, no device memory taken, the logits
// bit for bit those of copied weights (MINFER_VULKAN_IMPORT=0).
TEST_F(VulkanEngine, ImportsTheMappedWeightsWhereTheDeviceCan) {
    if (!vulkan::Context::open(device_index())->can_import_host())
        GTEST_SKIP() << "this Vulkan device imports no host memory";
    std::vector<int32_t> tokens(12);
    for (int32_t i = 0; i < 12; ++i) tokens[static_cast<std::size_t>(i)] = 2 + i * 7;
    for (const char* name : {"tiny-llama-q4_k_m.gguf", "tiny-gemma3-q8_0.gguf"}) {
        MINFER_REQUIRE_FIXTURE(model_path, std::string("models/") + name);
        setenv("MINFER_VULKAN_IMPORT", "0", 1);
        auto copied = test::make_engine(model_path, vulkan_options());
        setenv("MINFER_VULKAN_IMPORT", "1", 1);
        auto imported = test::make_engine(model_path, vulkan_options());
        unsetenv("MINFER_VULKAN_IMPORT");
        const DeviceTransfers c = *copied.engine->backend().device_transfers();
        const DeviceTransfers i = *imported.engine->backend().device_transfers();
        EXPECT_GT(c.weight_bytes_up, 0u) << name;
        EXPECT_EQ(c.weight_bytes_imported, 0u) << name;
        EXPECT_EQ(i.weight_bytes_up, 0u) << name;
        EXPECT_EQ(i.weight_bytes_imported, c.weight_bytes_up) << name;
        EXPECT_EQ(imported.engine->backend().weight_copy_bytes(), 0u) << name;
        const test::LogitRows expected = test::evaluate_all(*copied.engine, tokens);
        const test::LogitRows rows = test::evaluate_all(*imported.engine, tokens);
        ASSERT_EQ(rows.size(), expected.size());
        for (std::size_t k = 0; k < rows.size(); ++k)
            ASSERT_EQ(rows[k], expected[k]) << name << ", position " << k;
        expect_no_validation_errors(*imported.engine);
    }
}

// A matrix larger than the device binds at once (lavapipe binds 128 MiB; Qwen2 0.5B's tied Q8_0
// embedding is 144 MB) comes in windows of rows, one dispatch each. With a binding limit of 16 KiB
// imposed, every matrix of these models is windowed (rows of 210-byte Q6_K blocks among them),
// and the logits are bit for bit those of the whole bindings; an expert tensor beyond the limit
// is refused, naming it.
TEST_F(VulkanEngine, MatricesBeyondTheBindingLimitComeInWindows) {
    std::vector<int32_t> tokens(20);
    for (int32_t i = 0; i < 20; ++i) tokens[static_cast<std::size_t>(i)] = 1 + i * 13;
    for (const char* name :
         {"tiny-llama-q4_k_m.gguf", "tiny-qwen2-q8_0.gguf", "tiny-gemma2-f16.gguf"}) {
        MINFER_REQUIRE_FIXTURE(model_path, std::string("models/") + name);
        auto whole = test::make_engine(model_path, vulkan_options());
        const test::LogitRows expected = test::evaluate_all(*whole.engine, tokens);
        setenv("MINFER_VULKAN_MAX_BINDING", "16384", 1);
        auto windowed = test::make_engine(model_path, vulkan_options());
        unsetenv("MINFER_VULKAN_MAX_BINDING");
        const test::LogitRows rows = test::evaluate_all(*windowed.engine, tokens);
        ASSERT_EQ(rows.size(), expected.size());
        for (std::size_t i = 0; i < rows.size(); ++i)
            ASSERT_EQ(rows[i], expected[i]) << name << ", position " << i;
        expect_no_validation_errors(*windowed.engine);
    }
    MINFER_REQUIRE_FIXTURE(moe_path, "models/tiny-qwen3moe-q8_0.gguf");
    setenv("MINFER_VULKAN_MAX_BINDING", "16384", 1);
    try {
        test::make_engine(moe_path, vulkan_options());
        ADD_FAILURE() << "an expert tensor beyond the binding limit was accepted";
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("binds at once, and not a matrix of rows"),
                  std::string::npos)
            << e.what();
    }
    unsetenv("MINFER_VULKAN_MAX_BINDING");
}

// Attention split over the positions (attention_common.glsl), spans of 64 imposed so that these
// contexts of 99 to 200 positions take 2 to 4: a workgroup per (token, head, split) and a combine
// pass give bit for bit the logits of the single pass, which walks the same splits (global
// attention, sliding windows with soft-capping, GQA; f16, f32 and q8_0 caches); and the split pass
// agrees with the golden.
TEST_F(VulkanEngine, AttentionSplitOverThePositionsGivesTheSinglePassBits) {
    setenv("MINFER_VULKAN_ATTENTION_SPAN", "64", 1);
    const std::pair<const char*, GgmlType> cases[] = {{"tiny-llama-q8_0.json", GgmlType::F16},
                                                      {"tiny-gemma2-f16.json", GgmlType::F16},
                                                      {"tiny-phi3-q8_0.json", GgmlType::Q8_0},
                                                      {"tiny-qwen3-q8_0.json", GgmlType::F32}};
    for (const auto& [file, kv_type] : cases) {
        SCOPED_TRACE(file);
        MINFER_REQUIRE_FIXTURE(golden_path, std::string("golden/") + file);
        const test::Golden golden = test::load_golden(golden_path);
        MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
        const std::vector<int32_t> text = golden.longest_text();
        ASSERT_GT(text.size(), 64u);  // two splits at least
        // The same passes with the single pass, then the split one.
        std::map<std::string, uint64_t> dispatches;
        std::map<std::string, test::LogitRows> logits;
        std::map<std::string, test::TestEngine> engines;
        for (const char* choice : {"never", "always"}) {
            setenv("MINFER_VULKAN_ATTENTION_SPLIT", choice, 1);
            engines.emplace(choice, test::make_engine(model_path, vulkan_options(kv_type)));
            Engine& engine = *engines.at(choice).engine;
            const uint64_t before = engine.backend().device_transfers()->dispatches;
            logits[choice] = test::evaluate_all(engine, text);
            dispatches[choice] = engine.backend().device_transfers()->dispatches - before;
        }
        Engine& split = *engines.at("always").engine;
        // Two dispatches (split, combine) for each attention op of each pass instead of one.
        const Graph g = split.graph_for_prompt(text, /*all_logits=*/true);
        const auto n_attention = static_cast<uint64_t>(std::count_if(
            g.ops.begin(), g.ops.end(), [](const Op& op) { return op.type == OpType::Attention; }));
        const uint64_t passes = (text.size() + 6) / 7;
        EXPECT_EQ(dispatches["always"] - dispatches["never"], passes * n_attention);
        const test::LogitRows& rows = logits["always"];
        const test::LogitRows& expected = logits["never"];
        ASSERT_EQ(rows.size(), expected.size());
        for (std::size_t i = 0; i < rows.size(); ++i)
            ASSERT_EQ(rows[i], expected[i]) << "position " << i;
        const test::ParityFigures f =
            test::check_golden_parity(split, golden, golden.tolerance() * 2.0);
        expect_no_validation_errors(split);
        std::printf("vulkan split attention %-24s %s\n", golden.model.c_str(), f.summary().c_str());
    }
    unsetenv("MINFER_VULKAN_ATTENTION_SPLIT");
    unsetenv("MINFER_VULKAN_ATTENTION_SPAN");
}

// MINFER_TRACE on the device: every op of a pass timed by GPU timestamps, in the graph's order,
// within the pass's one submission.
TEST_F(VulkanEngine, TraceTimesEveryOpOnTheDevice) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/stories260K.gguf");
    std::vector<std::pair<std::string, double>> traced;  // (op, microseconds)
    EngineOptions options = vulkan_options(GgmlType::F16, 512);
    options.trace = [&traced](const Op& op, double micros) {
        traced.emplace_back(op_name(op), micros);
    };
    auto t = test::make_engine(model_path, options);
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5};
    const Graph g = t.engine->graph_for_prompt(prompt, /*all_logits=*/true);
    const uint64_t submissions = t.engine->backend().device_transfers()->submissions;
    test::evaluate_all(*t.engine, prompt);
    EXPECT_EQ(t.engine->backend().device_transfers()->submissions - submissions, 1u);
    ASSERT_EQ(traced.size(), g.ops.size());
    double total = 0;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
        EXPECT_EQ(traced[i].first, op_name(g.ops[i])) << i;
        EXPECT_TRUE(std::isfinite(traced[i].second) && traced[i].second >= 0) << traced[i].second;
        total += traced[i].second;
    }
    EXPECT_GT(total, 0.0);
    expect_no_validation_errors(*t.engine);
}

// Four sequences with prompts of 3, 10, 17 and 26 tokens run together (a batch budget of 16
// tokens: chunks of several prompts, then the decode steps of all four), each greedy for 4 tokens
// with the logits of every position: bit for bit what each gets alone on the same device.
TEST_F(VulkanEngine, BatchedSequencesGetTheBitsEachGetsAlone) {
    for (const char* file : {"tiny-qwen3-q8_0.json", "tiny-qwen3moe-q8_0.json"}) {
        SCOPED_TRACE(file);
        MINFER_REQUIRE_FIXTURE(golden_path, std::string("golden/") + file);
        const test::Golden golden = test::load_golden(golden_path);
        MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
        const std::vector<int32_t> text = golden.longest_text();
        const std::vector<std::ptrdiff_t> lengths = {3, 10, 17, 26};
        ASSERT_GE(std::ssize(text), lengths.back());
        auto batched = test::make_engine(model_path, vulkan_options(GgmlType::F16, 16, 4 * 512));
        const test::BatchedRun run = test::run_together(*batched.engine, text, lengths, 4);
        ASSERT_LT(run.steps, test::BatchedRun::kMaxSteps);
        auto alone = test::make_engine(model_path, vulkan_options(GgmlType::F16, 16));
        for (std::size_t i = 0; i < lengths.size(); ++i) {
            const test::LogitRows own = test::evaluate_all(*alone.engine, run.evaluated[i]);
            ASSERT_EQ(run.rows[i].size(), own.size());
            for (const auto& [pos, row] : run.rows[i])
                EXPECT_EQ(row, own[static_cast<std::size_t>(pos)])
                    << "sequence " << i << " position " << pos;
        }
        expect_no_validation_errors(*batched.engine);
    }
}

// A kept sequence continued inside its first (registered, so shared) block: the engine copies the
// block (copy_kv_block) before writing; the continuation gets the bits of a fresh evaluation.
TEST_F(VulkanEngine, ContinuedSequenceCopiesItsSharedBlock) {
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/tiny-llama-q8_0.json");
    const test::Golden golden = test::load_golden(golden_path);
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + golden.model);
    const std::vector<int32_t> text = golden.longest_text();
    ASSERT_GE(text.size(), 30u);
    auto t = test::make_engine(model_path, vulkan_options(GgmlType::F16, 512));
    SequenceParams first;
    first.prompt.assign(text.begin(), text.begin() + 20);
    first.n_predict = 0;
    first.keep = true;
    const SeqId kept = t.engine->submit(std::move(first));
    while (t.engine->busy()) t.engine->step();
    // Continue from position 10: inside block 0 (positions 0..15), which the prefix cache holds.
    SequenceParams next;
    next.prompt.assign(text.begin(), text.begin() + 10);
    next.prompt.insert(next.prompt.end(), text.begin() + 20, text.begin() + 30);
    next.continue_from = kept;
    next.n_predict = 0;
    next.all_logits = true;
    std::map<int64_t, std::vector<float>> rows;
    next.on_logits = [&rows](int64_t pos, std::span<const float> row) {
        rows[pos].assign(row.begin(), row.end());
    };
    const std::vector<int32_t> whole = next.prompt;
    t.engine->submit(std::move(next));
    while (t.engine->busy()) t.engine->step();
    auto fresh = test::make_engine(model_path, vulkan_options(GgmlType::F16, 512));
    const test::LogitRows expected = test::evaluate_all(*fresh.engine, whole);
    ASSERT_FALSE(rows.empty());
    for (const auto& [pos, row] : rows)
        EXPECT_EQ(row, expected[static_cast<std::size_t>(pos)]) << "position " << pos;
    expect_no_validation_errors(*t.engine);
}

TEST_F(VulkanEngine, RefusesWhatItCannotRun) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/tiny-llama-q8_0.gguf");
    // A q8_0 cache is stored a pair of 32-value blocks at a time: rows of 3 heads of 32 values
    // (valid for the CPU backend) are refused.
    BackendOptions odd;
    odd.n_vocab = 16;
    odd.kv.type = GgmlType::Q8_0;
    odd.kv.n_blocks = 1;
    odd.kv.layers = {KvLayerShape{3, 32, 32}};
    try {
        make_vulkan_backend(odd, device_index());
        ADD_FAILURE() << "a q8_0 cache of rows of 96 was accepted";
    } catch (const UnsupportedError& e) {
        EXPECT_NE(std::string(e.what()).find("rows of multiples of 64 values, not 96 and 96"),
                  std::string::npos)
            << e.what();
    }
    // A device memory budget (3 MB) that holds the cache (1 MiB) but not the weights (4.4 MiB)
    // copied: refused with the sizes before anything is uploaded.
    setenv("MINFER_VULKAN_IMPORT", "0", 1);
    setenv("MINFER_VULKAN_MEMORY_BUDGET", "3000000", 1);
    try {
        test::make_engine(model_path, vulkan_options());
        ADD_FAILURE() << "a model beyond the memory budget was accepted";
    } catch (const LimitError& e) {
        EXPECT_NE(std::string(e.what()).find("do not fit in"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("of its 2.9 MiB are free"), std::string::npos)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("fewer layers on it with -ngl N"), std::string::npos)
            << e.what();
    }
    // A cache beyond it: the same, naming --ctx.
    setenv("MINFER_VULKAN_MEMORY_BUDGET", "100000", 1);
    try {
        test::make_engine(model_path, vulkan_options());
        ADD_FAILURE() << "a cache beyond the memory budget was accepted";
    } catch (const LimitError& e) {
        EXPECT_NE(std::string(e.what()).find("lower --ctx"), std::string::npos) << e.what();
    }
    unsetenv("MINFER_VULKAN_MEMORY_BUDGET");
    unsetenv("MINFER_VULKAN_IMPORT");
}

}  // namespace
}  // namespace minfer
