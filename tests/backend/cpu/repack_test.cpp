// The CPU backend's repacked weights (backend/cpu/packed_weights.h): on every fixture model the
// logits are bit for bit those of the weights in the file's layout (--no-repack), prompt and
// decode steps alike, in the batch-invariant mode (the default); the backend reports the copies it
// made exactly where the CPU has interleaved kernels for a weight type, and none with --no-repack.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/engine_helpers.h"
#include "common/fixtures.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"
#include "runtime/generation.h"

namespace minfer {
namespace {

EngineOptions options_with(bool repack) {
    EngineOptions o;
    o.n_threads = 2;
    o.n_ctx = 128;
    o.repack_weights = repack;
    return o;
}

// Whether any tensor of the model is a matrix the CPU packs.
bool has_packable_matrix(const Model& model) {
    for (const TensorInfo* t : model.file().tensors()) {
        if (t->n_dims == 2 && kernels::has_packed_layout(t->type) &&
            kernels::packed_kernels_available(t->type)) {
            return true;
        }
    }
    return false;
}

class Repack : public testing::TestWithParam<std::string> {};

TEST_P(Repack, GivesTheSameBitsAsTheFileLayout) {
    MINFER_REQUIRE_FIXTURE(model_path, "models/" + GetParam());
    auto packed = test::make_engine(model_path, options_with(true));
    auto plain = test::make_engine(model_path, options_with(false));
    EXPECT_EQ(plain.engine->backend().weight_copy_bytes(), 0u);
    if (has_packable_matrix(*packed.model.model)) {
        EXPECT_GT(packed.engine->backend().weight_copy_bytes(), 0u);
    } else {
        EXPECT_EQ(packed.engine->backend().weight_copy_bytes(), 0u);
    }

    const auto n_vocab = static_cast<int32_t>(packed.model.model->hparams().n_vocab);
    std::mt19937 rng(99);
    std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
    std::vector<int32_t> tokens(37);
    for (auto& t : tokens) t = token(rng);
    // One prompt of 37 tokens (the panels of 32 tokens and more), then the same tokens one at a
    // time (the decode kernels: each step continues the kept sequence with the next token).
    for (bool one_by_one : {false, true}) {
        const auto evaluate = [&](Engine& engine) {
            test::LogitRows rows;
            if (!one_by_one) return test::evaluate_all(engine, tokens);
            std::optional<SeqId> kept;
            for (std::size_t i = 0; i < tokens.size(); ++i) {
                SequenceParams p;
                p.prompt.assign(tokens.begin(), tokens.begin() + static_cast<long>(i) + 1);
                p.sampling.temperature = 0.0f;
                p.n_predict = 1;  // the row it is sampled from: position i's
                p.ignore_eog = true;
                p.keep = true;
                p.continue_from = kept;
                p.on_logits = [&rows](int64_t, std::span<const float> row) {
                    rows.emplace_back(row.begin(), row.end());
                };
                kept = generate(engine, std::move(p), nullptr).id;
            }
            return rows;
        };
        const test::LogitRows a = evaluate(*packed.engine);
        const test::LogitRows b = evaluate(*plain.engine);
        ASSERT_EQ(a.size(), b.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            ASSERT_EQ(a[i].size(), b[i].size());
            EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)), 0)
                << (one_by_one ? "one token at a time" : "one prompt") << ": logits of position "
                << i << " differ";
        }
    }
}

std::string repack_name(const testing::TestParamInfo<std::string>& info) {
    std::string name = info.param.substr(0, info.param.size() - 5);
    for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return name;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Repack, testing::ValuesIn(test::engine_fixture_models()),
                         repack_name);

}  // namespace
}  // namespace minfer
