// ReadBandwidthProbe: whole reads and slices give a positive rate; slices go round the buffer and
// never read past it.

#include <gtest/gtest.h>

#include "core/thread_pool.h"
#include "kernels/machine_limits.h"

namespace minfer {
namespace {

TEST(ReadBandwidthProbe, WholeReadsAndSlicesMeasureARate) {
    ThreadPool pool(2);
    ReadBandwidthProbe probe(pool, std::size_t{8} << 20);
    EXPECT_GE(probe.bytes(), std::size_t{8} << 20);
    EXPECT_GT(probe.measure(2), 0.0);
    // 3 MiB slices of an 8 MiB buffer: the third starts over from the beginning; a slice larger
    // than the buffer reads the buffer once.
    for (int i = 0; i < 5; ++i) EXPECT_GT(probe.measure_slice(std::size_t{3} << 20), 0.0) << i;
    EXPECT_GT(probe.measure_slice(std::size_t{64} << 20), 0.0);
    EXPECT_GT(probe.measure_slice(100), 0.0);  // under a line: rounded down, still a rate
}

}  // namespace
}  // namespace minfer
