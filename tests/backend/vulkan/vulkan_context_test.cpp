// The Vulkan device layer (backend/vulkan) on whatever Vulkan device the machine has: Mesa's
// lavapipe everywhere (scripts/setup.sh installs it; in CI a missing device fails), a real GPU
// where there is one (MINFER_VULKAN_DEVICE=N picks vulkan:N). The Khronos validation layer is on
// for every test (MINFER_VULKAN_VALIDATION=1) and must report nothing.
//
// The matrix-vector shader against double-precision dot products of the dequantized weights, for
// each weight type it is built for: the GPU sums in f32 in another order, so the tolerance is a
// few f32 roundings of the sum of |products|.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "backend/vulkan/vulkan_commands.h"
#include "backend/vulkan/vulkan_context.h"
#include "backend/vulkan/vulkan_shaders.h"
#include "common/fixtures.h"
#include "core/error.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "quant/dequantize.h"
#include "quant/quant_fixture.h"
#include "quant/quantize.h"

namespace minfer {
namespace {

int device_index() {
    const char* n = std::getenv("MINFER_VULKAN_DEVICE");
    return n != nullptr ? std::atoi(n) : 0;
}

// The device under test, opened once with validation on; null (and the test skipped, or failed
// in CI) where the machine has none.
class VulkanTest : public testing::Test {
  protected:
    static void SetUpTestSuite() {
        setenv("MINFER_VULKAN_VALIDATION", "1", /*overwrite=*/0);
        const VulkanDeviceList list = list_vulkan_devices();
        if (list.devices.empty()) {
            unavailable_ = list.unavailable;
            return;
        }
        context_ = vulkan::Context::open(device_index());
    }
    static void TearDownTestSuite() { context_.reset(); }

    void SetUp() override {
        if (context_ == nullptr) {
            if (test::in_ci()) FAIL() << "no Vulkan device in CI: " << unavailable_;
            GTEST_SKIP() << "no Vulkan device: " << unavailable_;
        }
        errors_before_ = context_->instance().validation_errors();
    }
    void TearDown() override {
        if (context_ == nullptr) return;
        EXPECT_EQ(context_->instance().validation_errors(), errors_before_)
            << "validation: " << context_->instance().first_validation_error();
    }

    static std::shared_ptr<vulkan::Context> context_;
    static std::string unavailable_;
    int errors_before_ = 0;
};
std::shared_ptr<vulkan::Context> VulkanTest::context_;
std::string VulkanTest::unavailable_;

TEST_F(VulkanTest, DescribesTheDevice) {
    const VulkanDeviceInfo& d = context_->info();
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(VK_API_VERSION_MINOR(d.api_version), 2u);
    EXPECT_GT(d.device_local_bytes, 0u);
    EXPECT_GT(d.max_storage_buffer_bytes, 0u);
    if (std::string(std::getenv("MINFER_VULKAN_VALIDATION")) == "1") {
        EXPECT_TRUE(context_->instance().validation());
    }
    std::printf("device: %s (%s, %s, driver %s; %s)\n", d.name.c_str(), d.type.c_str(),
                d.api().c_str(), d.driver.c_str(), d.features().c_str());
}

TEST_F(VulkanTest, UploadAndReadBackKeepEveryByte) {
    std::vector<std::byte> bytes(1000003);
    std::mt19937 rng(1);
    for (auto& b : bytes) b = static_cast<std::byte>(rng());
    vulkan::Buffer buffer = context_->device_buffer(bytes.size() + 5);
    const auto before = context_->stats();
    context_->upload(buffer, bytes, 5);
    std::vector<std::byte> back(bytes.size());
    context_->download(buffer, back, 5);
    EXPECT_EQ(std::memcmp(back.data(), bytes.data(), bytes.size()), 0);
    EXPECT_EQ(context_->stats().bytes_up - before.bytes_up, bytes.size());
    EXPECT_EQ(context_->stats().bytes_down - before.bytes_down, bytes.size());
    // Beyond the buffer: refused, nothing written.
    EXPECT_THROW(context_->upload(buffer, bytes, 6), UsageError);
}

TEST_F(VulkanTest, RefusesWhatTheDeviceCannotHold) {
    EXPECT_THROW(vulkan::Context::open(1000), UnsupportedError);
    try {
        context_->device_buffer(context_->info().max_storage_buffer_bytes + 1);
        ADD_FAILURE() << "a buffer beyond the binding limit was made";
    } catch (const LimitError& e) {
        EXPECT_NE(std::string(e.what()).find("binds at once"), std::string::npos) << e.what();
    }
}

struct MatVecCase {
    GgmlType type;
    int64_t n_in;
};

class VulkanMatVecTest : public VulkanTest, public testing::WithParamInterface<MatVecCase> {};

// y [n_tokens][n_out] = x [n_tokens][n_in] · W^T through one of the two product shaders (a row
// per workgroup, "matmul_vec", or per invocation, "matmul_rows"), in one submission; the row
// groups split between x and z (at most 3 in x) as a vocabulary beyond the x limit would be.
std::vector<float> run_mat_vec(vulkan::Context& c, const std::string& shader, GgmlType type,
                               const std::vector<std::byte>& w, const std::vector<float>& x,
                               int64_t n_in, int64_t n_out, int64_t n_tokens) {
    const std::string name = concat(shader, "_", type_name(type));
    vulkan::Pipeline pipeline = c.pipeline(vulkan::shader_spirv(name), 3, 36);
    vulkan::Buffer wb = c.device_buffer(w.size()), xb = c.device_buffer(x.size() * 4),
                   yb = c.device_buffer(static_cast<uint64_t>(n_out * n_tokens) * 4);
    c.upload(wb, w);
    c.upload(xb, std::as_bytes(std::span(x)));
    // n_in, n_out, n_rows, row_bytes, k, per_slot, expert_bytes, row_base, y_stride
    const uint32_t push[9] = {static_cast<uint32_t>(n_in),
                              static_cast<uint32_t>(n_out),
                              static_cast<uint32_t>(n_tokens),
                              static_cast<uint32_t>(row_size(type, n_in)),
                              0,
                              0,
                              0,
                              0,
                              static_cast<uint32_t>(n_out)};
    const vulkan::Buffer* buffers[] = {&wb, &xb, &yb};
    const auto before = c.stats();
    vulkan::Commands commands(c);
    const bool per_invocation = shader == "matmul_rows";
    const auto row_groups = static_cast<uint32_t>(per_invocation ? (n_out + 63) / 64 : n_out);
    const auto input_groups = static_cast<uint32_t>(n_tokens);
    const uint32_t groups_x = 3;
    const uint32_t groups_z = (row_groups + groups_x - 1) / groups_x;
    commands.dispatch(pipeline, buffers, std::as_bytes(std::span(push)), groups_x, input_groups,
                      groups_z);
    commands.submit_and_wait();
    EXPECT_EQ(c.stats().submissions - before.submissions, 1u);
    EXPECT_EQ(c.stats().host_waits - before.host_waits, 1u);
    std::vector<float> y(static_cast<std::size_t>(n_out * n_tokens));
    c.download(yb, std::as_writable_bytes(std::span(y)));
    return y;
}

// y [n_tokens][n_out] against double-precision dot products of the weights' values w [n_out][n_in]
// with x [n_tokens][n_in]: the GPU sums in f32 in another order, so within a few f32 roundings of
// the sum of |products|.
void expect_products(const std::vector<float>& y, const std::vector<float>& w,
                     const std::vector<float>& x, int64_t n_in, int64_t n_out, int64_t n_tokens) {
    for (int64_t t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < n_out; ++r) {
            double dot = 0, magnitude = 0;
            for (int64_t c = 0; c < n_in; ++c) {
                const double p = static_cast<double>(w[static_cast<std::size_t>(r * n_in + c)]) *
                                 x[static_cast<std::size_t>(t * n_in + c)];
                dot += p;
                magnitude += std::abs(p);
            }
            ASSERT_NEAR(y[static_cast<std::size_t>(t * n_out + r)], dot, 1e-5 * magnitude + 1e-6)
                << "token " << t << " row " << r;
        }
    }
}

TEST_P(VulkanMatVecTest, MatchesDotProductsOfTheStoredWeights) {
    const auto [type, n_in] = GetParam();
    const int64_t n_out = 300, n_tokens = 11;
    std::mt19937 rng(static_cast<unsigned>(n_in));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(static_cast<std::size_t>(n_out * n_in));
    for (float& v : values) v = normal(rng);
    std::vector<std::byte> w(row_size(type, n_in) * static_cast<std::size_t>(n_out));
    for (int64_t r = 0; r < n_out; ++r) {
        std::byte* row = w.data() + static_cast<std::size_t>(r) * row_size(type, n_in);
        quantize_row(type, values.data() + r * n_in, row, n_in);
        dequantize_row(type, row, values.data() + r * n_in, n_in);  // what the shader reads
    }
    std::vector<float> x(static_cast<std::size_t>(n_tokens * n_in));
    for (float& v : x) v = normal(rng);
    for (const std::string shader : {"matmul_vec", "matmul_rows"}) {
        SCOPED_TRACE(shader);
        const std::vector<float> y =
            run_mat_vec(*context_, shader, type, w, x, n_in, n_out, n_tokens);
        expect_products(y, values, x, n_in, n_out, n_tokens);
        // The same bits on a second run: the sums' order is fixed by the shader, not the scheduler.
        EXPECT_EQ(run_mat_vec(*context_, shader, type, w, x, n_in, n_out, n_tokens), y);
    }
}

// ggml's own bytes of every type (../shared/fixtures/quant: 16 rows of 512 values quantized by
// ggml, with ggml's dequantization): the get_rows shader gives ggml's values (within a rounding:
// a driver may fuse the scale's multiply and add), and both product shaders their dot products.
class VulkanGgmlBlocks : public VulkanTest, public testing::WithParamInterface<GgmlType> {};

TEST_P(VulkanGgmlBlocks, DequantizeAndMultiplyAsGgml) {
    MINFER_REQUIRE_FIXTURE(path, test::kQuantFixture);
    const GgufFile file = GgufFile::open(path);
    const GgmlType type = GetParam();
    const TensorInfo& q = file.tensor(concat("q.", type_name(type)));
    const std::vector<float> expected =
        test::read_f32_tensor(file, concat("deq.", type_name(type)));
    const int64_t n_in = q.ne[0], n_out = q.n_rows();
    const std::vector<std::byte> w(q.data.begin(), q.data.end());

    vulkan::Context& c = *context_;
    vulkan::Buffer wb = c.device_buffer(w.size()), ids = c.device_buffer(4 * n_out),
                   rows = c.device_buffer(4 * static_cast<uint64_t>(n_out * n_in));
    c.upload(wb, w);
    std::vector<int32_t> order(static_cast<std::size_t>(n_out));
    for (int64_t r = 0; r < n_out; ++r)
        order[static_cast<std::size_t>(r)] = static_cast<int32_t>(n_out - 1 - r);
    c.upload(ids, std::as_bytes(std::span(order)));
    vulkan::Pipeline get_rows =
        c.pipeline(vulkan::shader_spirv(concat("get_rows_", type_name(type))), 3, 24);
    // n_tokens, width, row_bytes, tokens, row_base, n_window
    const uint32_t push[6] = {static_cast<uint32_t>(n_out),
                              static_cast<uint32_t>(n_in),
                              static_cast<uint32_t>(row_size(type, n_in)),
                              0,
                              0,
                              static_cast<uint32_t>(n_out)};
    const vulkan::Buffer* buffers[] = {&wb, &ids, &rows};
    vulkan::Commands commands(c);
    commands.dispatch(get_rows, buffers, std::as_bytes(std::span(push)),
                      static_cast<uint32_t>(n_out));
    commands.submit_and_wait();
    std::vector<float> got(static_cast<std::size_t>(n_out * n_in));
    c.download(rows, std::as_writable_bytes(std::span(got)));
    int mismatches = 0;
    for (int64_t r = 0; r < n_out; ++r) {
        for (int64_t i = 0; i < n_in; ++i) {
            const float g = got[static_cast<std::size_t>(r * n_in + i)];
            const float e = expected[static_cast<std::size_t>((n_out - 1 - r) * n_in + i)];
            if (!(std::abs(g - e) <= 1e-6f * std::abs(e) + 1e-30f) && ++mismatches <= 5)
                ADD_FAILURE() << "row " << n_out - 1 - r << " value " << i << ": " << g << ", ggml "
                              << e;
        }
    }
    EXPECT_EQ(mismatches, 0);

    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const int64_t n_tokens = 3;
    std::vector<float> x(static_cast<std::size_t>(n_tokens * n_in));
    for (float& v : x) v = normal(rng);
    for (const std::string shader : {"matmul_vec", "matmul_rows"}) {
        SCOPED_TRACE(shader);
        const std::vector<float> y = run_mat_vec(c, shader, type, w, x, n_in, n_out, n_tokens);
        expect_products(y, expected, x, n_in, n_out, n_tokens);
    }
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, VulkanGgmlBlocks,
    testing::Values(GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                    GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                    GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS,
                    GgmlType::TQ1_0, GgmlType::TQ2_0),
    [](const auto& test_info) { return std::string(type_name(test_info.param)); });

INSTANTIATE_TEST_SUITE_P(
    Types, VulkanMatVecTest,
    testing::Values(MatVecCase{GgmlType::F32, 100}, MatVecCase{GgmlType::F32, 4096},
                    MatVecCase{GgmlType::F16, 130}, MatVecCase{GgmlType::BF16, 70},
                    MatVecCase{GgmlType::Q4_0, 512}, MatVecCase{GgmlType::Q4_1, 96},
                    MatVecCase{GgmlType::Q5_0, 160}, MatVecCase{GgmlType::Q5_1, 96},
                    MatVecCase{GgmlType::Q8_0, 256}, MatVecCase{GgmlType::Q8_0, 96},
                    MatVecCase{GgmlType::Q4_K, 512}, MatVecCase{GgmlType::Q6_K, 768}),
    [](const auto& test_info) {
        return concat(type_name(test_info.param.type), "_", test_info.param.n_in);
    });

}  // namespace
}  // namespace minfer
