// The CPU backend's store of interleaved copies (backend/cpu/packed_weights.h): the matrices of a
// 3-D expert tensor are packed one 2-D slice at a time and each finds its own copy, a matrix
// handed over twice is packed once, the products on the copies have the bits of the originals,
// and the originals stay readable afterwards, in anonymous memory (never dropped: it would come
// back as zeros) and in a file mapping (dropped from the mapping, read back from the file).

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>
#include <fstream>
#include <random>

#include "backend/cpu/packed_weights.h"
#include "common/fixtures.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/matmul_simd.h"
#include "kernels/packed_layout.h"
#include "quant/quantize.h"

namespace minfer {
namespace {

constexpr int64_t kCols = 512, kRows = 40, kExperts = 3;

// kExperts matrices of kRows x kCols Q4_0, one after the other (a 3-D tensor's bytes).
std::vector<std::byte> expert_bytes() {
    std::mt19937 rng(5);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    const std::size_t row = row_size(GgmlType::Q4_0, kCols);
    std::vector<std::byte> bytes(row * kRows * kExperts);
    std::vector<float> values(kCols);
    for (int64_t r = 0; r < kRows * kExperts; ++r) {
        for (float& v : values) v = normal(rng);
        quantize_row(GgmlType::Q4_0, values.data(), bytes.data() + r * row, kCols);
    }
    return bytes;
}

WeightMatrix expert(std::span<const std::byte> tensor, int64_t e) {
    const std::size_t bytes = row_size(GgmlType::Q4_0, kCols) * kRows;
    return {GgmlType::Q4_0, kCols, kRows,
            tensor.subspan(static_cast<std::size_t>(e) * bytes, bytes)};
}

std::vector<float> product(const WeightMatrix& w, const std::vector<float>& x, int64_t tokens) {
    ThreadPool pool(2);
    MatmulScratch scratch;
    std::vector<float> y(static_cast<std::size_t>(w.n_rows * tokens));
    matmul(w, x.data(), tokens, y.data(), pool, scratch, MatmulMode::kBatchInvariant);
    return y;
}

void check_experts(std::span<const std::byte> tensor) {
    std::mt19937 rng(6);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    constexpr int64_t kTokens = 3;
    std::vector<float> x(kCols * kTokens);
    for (float& v : x) v = normal(rng);
    std::vector<std::vector<float>> before;
    std::vector<WeightMatrix> matrices;
    for (int64_t e = 0; e < kExperts; ++e) {
        before.push_back(product(expert(tensor, e), x, kTokens));
        matrices.push_back(expert(tensor, e));
    }
    matrices.push_back(expert(tensor, 1));  // the same matrix twice: packed once

    PackedWeights packed;
    ThreadPool pool(2);
    packed.prepare(matrices, pool);
    const bool available = kernels::packed_kernels_available(GgmlType::Q4_0);
    const std::size_t one = kernels::packed_layout(GgmlType::Q4_0, kCols, kRows).bytes();
    EXPECT_EQ(packed.matrices(), available ? kExperts : 0);
    EXPECT_EQ(packed.bytes(), available ? kExperts * ((one + 4095) / 4096 * 4096) : 0);
    for (int64_t e = 0; e < kExperts; ++e) {
        SCOPED_TRACE("expert " + std::to_string(e));
        const WeightMatrix w = packed.attach(expert(tensor, e));
        EXPECT_EQ(w.packed.size(), available ? one : 0);
        if (available && e > 0) {
            EXPECT_NE(w.packed.data(), packed.attach(expert(tensor, e - 1)).packed.data());
        }
        // On the copy, and on the original (its pages dropped or not), the same bits.
        EXPECT_EQ(product(w, x, kTokens), before[static_cast<std::size_t>(e)]);
        EXPECT_EQ(product(expert(tensor, e), x, kTokens), before[static_cast<std::size_t>(e)]);
    }
    // A matrix never prepared has no copy.
    const WeightMatrix other{GgmlType::Q4_0, kCols, kRows / 2,
                             expert(tensor, 0).data.first(expert(tensor, 0).data.size() / 2)};
    EXPECT_TRUE(packed.attach(other).packed.empty());
}

TEST(PackedWeights, PacksEachExpertOfAnAnonymousTensor) {
    const std::vector<std::byte> bytes = expert_bytes();
    check_experts(bytes);
}

TEST(PackedWeights, PacksEachExpertOfAMappedFile) {
    const std::vector<std::byte> bytes = expert_bytes();
    test::TempDir dir;
    {
        std::ofstream out(dir / "experts.bin", std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()),
                  static_cast<std::streamsize>(bytes.size()));
    }
    const MappedFile file(dir / "experts.bin");
    ASSERT_EQ(file.size(), bytes.size());
    check_experts(file.bytes());
    EXPECT_EQ(std::memcmp(file.bytes().data(), bytes.data(), bytes.size()), 0);
}

// Without the memory for the copies (RLIMIT_AS just above what the process maps), prepare()
// warns once and keeps the file's layout, and keeps it afterwards: the backend calls prepare()
// before every graph, which must not warn (or read /proc) at every step.
TEST(PackedWeights, RefusedMemoryWarnsOnceAndPacksNothingAfterwards) {
    if (!kernels::packed_kernels_available(GgmlType::Q4_0)) GTEST_SKIP() << "no packed kernels";
    // One matrix of 1.1 MB, beyond 1 MiB of headroom.
    constexpr int64_t kBigCols = 2048, kBigRows = 1024;
    const std::vector<std::byte> bytes(row_size(GgmlType::Q4_0, kBigCols) * kBigRows);
    const std::vector<WeightMatrix> matrices = {
        {GgmlType::Q4_0, kBigCols, kBigRows, std::span<const std::byte>(bytes)}};
    ThreadPool pool(2);
    PackedWeights packed;
    int warnings = 0;
    set_log_sink([&](LogLevel level, std::string_view) { warnings += level == LogLevel::Warning; });
    struct rlimit saved {};
    ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
    std::ifstream status("/proc/self/status");
    std::string line;
    unsigned long long vm_kb = 0;
    while (std::getline(status, line))
        if (line.rfind("VmSize:", 0) == 0) vm_kb = std::stoull(line.substr(7));
    ASSERT_GT(vm_kb, 0u);
    struct rlimit tight = saved;
    tight.rlim_cur = vm_kb * 1024 + (1u << 20);
    ASSERT_EQ(setrlimit(RLIMIT_AS, &tight), 0);
    packed.prepare(matrices, pool);
    ASSERT_EQ(setrlimit(RLIMIT_AS, &saved), 0);
    packed.prepare(matrices, pool);  // memory there now, but the decision stands
    set_log_sink(nullptr);
    EXPECT_EQ(warnings, 1);
    EXPECT_EQ(packed.matrices(), 0u);
    EXPECT_TRUE(packed.attach(matrices[0]).packed.empty());
}

}  // namespace
}  // namespace minfer
