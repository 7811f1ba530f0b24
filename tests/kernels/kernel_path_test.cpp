// Which CPUs the AVX2 packed kernels issue software prefetches on, and how benchmarks name the
// kernels and the CPU (kernel_path.h).
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "kernels/kernel_path.h"

namespace minfer {
namespace {

TEST(SoftwarePrefetch, OnZen3AndOlderZen5AndOtherVendors) {
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x19, 0x01));  // Milan
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x19, 0x21));  // Vermeer
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x19, 0x50));  // Cezanne
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x17, 0x31));  // Rome (Zen 2)
    EXPECT_TRUE(software_prefetch_pays_on(false, 0x6, 0x8F));  // an Intel Xeon
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x1A, 0x02));  // Turin (Zen 5: measured)
}

TEST(SoftwarePrefetch, NotOnZen4) {
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0x11));  // Genoa (the Zen 4 VM: model 17)
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0x61));  // Raphael
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0x74));  // Phoenix
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0xA0));  // Bergamo
}

TEST(SoftwarePrefetch, FartherAheadOnZen5) {
    EXPECT_EQ(software_prefetch_distance_on(true, 0x1A, 0x02), 8192);  // Turin (measured)
    EXPECT_EQ(software_prefetch_distance_on(true, 0x1A, 0x44), 8192);  // Granite Ridge
    EXPECT_EQ(software_prefetch_distance_on(true, 0x19, 0x01), 2048);  // Milan
    EXPECT_EQ(software_prefetch_distance_on(false, 0x6, 0x8F), 2048);  // an Intel Xeon
}

TEST(SoftwarePrefetch, SwitchesAndReturnsToTheCpusChoice) {
    set_x86_software_prefetch(!software_prefetch_pays());
    EXPECT_NE(x86_software_prefetch(), software_prefetch_pays());
    set_x86_software_prefetch(false);
    EXPECT_EQ(x86_software_prefetch_distance(), 0);
    set_x86_software_prefetch(true);
    EXPECT_GE(x86_software_prefetch_distance(), 2048);
    set_x86_software_prefetch(software_prefetch_pays());
    EXPECT_EQ(x86_software_prefetch(), software_prefetch_pays());
}

TEST(KernelsInUse, NamesTheScalarPathAndTheAvx2PrefetchChoice) {
    EXPECT_FALSE(kernels_in_use().empty());
    set_kernel_path(KernelPath::kScalar);
    EXPECT_EQ(kernels_in_use(), "scalar");
    set_kernel_path(KernelPath::kBest);
    if (kernels_in_use().rfind("AVX2", 0) == 0) {
        set_x86_software_prefetch(true);
        EXPECT_EQ(kernels_in_use(), concat("AVX2 (software prefetch on, ",
                                           x86_software_prefetch_distance(), " bytes ahead)"));
        set_x86_software_prefetch(false);
        EXPECT_EQ(kernels_in_use(), "AVX2 (software prefetch off)");
        set_x86_software_prefetch(software_prefetch_pays());
    }
}

TEST(CpuBrand, TrimmedWhereKnown) {
    const std::string brand = cpu_brand();
    if (brand.empty()) GTEST_SKIP() << "no brand string on this CPU";
    EXPECT_NE(brand.front(), ' ');
    EXPECT_NE(brand.back(), ' ');
    EXPECT_EQ(brand.find('\0'), std::string::npos);
}

// Which kernels this CPU runs, when the test run says what it expects: scripts/test.sh runs the
// aarch64 build under QEMU as three CPUs and expects "NEON" (cortex-a53), "NEON DOTPROD"
// (neoverse-n1) and "SVE2 DOTPROD I8MM" (max), so a missing kernel cannot hide behind a fallback.
TEST(KernelsInUse, AreTheOnesTheTestRunExpects) {
    const char* expected = std::getenv("MINFER_EXPECT_KERNELS");
    if (expected == nullptr) GTEST_SKIP() << "MINFER_EXPECT_KERNELS is not set";
    EXPECT_EQ(kernels_in_use(), expected) << "on " << cpu_brand() << " (" << arm_features() << ")";
}

TEST(ArmCpuName, FromImplementerAndPart) {
    EXPECT_EQ(arm_cpu_name(0x41, 0xd0c), "ARM Neoverse-N1");
    EXPECT_EQ(arm_cpu_name(0x41, 0xd03), "ARM Cortex-A53");
    EXPECT_EQ(arm_cpu_name(0x41, 0xfff), "");
}

}  // namespace
}  // namespace minfer
