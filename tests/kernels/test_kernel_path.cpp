// Which CPUs the AVX2 packed kernels issue software prefetches on (kernel_path.h).
#include <gtest/gtest.h>

#include "kernels/kernel_path.h"

namespace minfer {
namespace {

TEST(SoftwarePrefetch, OnZen3AndOlderAndOtherVendors) {
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x19, 0x01));   // Milan
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x19, 0x21));   // Vermeer
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x19, 0x50));   // Cezanne
    EXPECT_TRUE(software_prefetch_pays_on(true, 0x17, 0x31));   // Rome (Zen 2)
    EXPECT_TRUE(software_prefetch_pays_on(false, 0x6, 0x8F));   // an Intel Xeon
}

TEST(SoftwarePrefetch, NotOnZen4AndLater) {
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0x11));  // Genoa (the Zen 4 VM: model 17)
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0x61));  // Raphael
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0x74));  // Phoenix
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x19, 0xA0));  // Bergamo
    EXPECT_FALSE(software_prefetch_pays_on(true, 0x1A, 0x02));  // Zen 5
}

TEST(SoftwarePrefetch, SwitchesAndReturnsToTheCpusChoice) {
    set_avx2_software_prefetch(!software_prefetch_pays());
    EXPECT_NE(avx2_software_prefetch(), software_prefetch_pays());
    set_avx2_software_prefetch(software_prefetch_pays());
    EXPECT_EQ(avx2_software_prefetch(), software_prefetch_pays());
}

}  // namespace
}  // namespace minfer
