// --device and --list-devices through the built binary: the reference backend runs a model and
// writes llama.cpp's greedy story, the bench names its backend, the Vulkan devices are listed, and
// a device that cannot run is refused before the model is loaded.

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "common/fixtures.h"
#include "common/golden.h"

namespace minfer {
namespace {

using test::run_minfer;

TEST(DeviceFlag, ReferenceBackendWritesTheGoldenStory) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    MINFER_REQUIRE_FIXTURE(golden_path, "golden/stories260K.json");
    std::string golden_text;
    for (const auto& c : test::load_golden(golden_path).cases) {
        if (c.prompt.empty()) golden_text = c.generated_text;
    }
    const auto r = run_minfer({"run", model.string(), "--device", "reference", "--raw", "-p", "",
                               "--temp", "0", "-n", "24"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::string out = r.out;
    ASSERT_FALSE(out.empty());
    out.pop_back();  // the newline after the answer
    EXPECT_GT(out.size(), 40u);
    EXPECT_EQ(golden_text.compare(0, out.size(), out), 0) << "got: " << out;
}

TEST(DeviceFlag, BenchNamesTheBackend) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto r = run_minfer({"bench", model.string(), "--device", "reference", "-p", "8", "-n",
                               "4", "-r", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto rows = nlohmann::json::parse(r.out);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0]["backends"], "Reference");
    const auto table =
        run_minfer({"bench", model.string(), "-p", "8", "-n", "0", "-r", "1", "--no-roofline"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_NE(table.out.find("| CPU     |"), std::string::npos) << table.out;
}

TEST(DeviceFlag, RefusesWhatCannotRunBeforeLoading) {
    // A model path that does not exist: the flag is refused first, with exit code 2.
    for (const char* device : {"gpu", "vulkan:x", "vulkan:-1", ""}) {
        const auto r = run_minfer({"run", "/nonexistent.gguf", "--device", device, "-p", "x"});
        EXPECT_EQ(r.exit_code, 2) << device << ": " << r.err;
        EXPECT_NE(r.err.find("expected cpu, reference, vulkan or vulkan:N"), std::string::npos)
            << r.err;
    }
    // A Vulkan device the machine does not have.
    const auto r = run_minfer({"run", "/nonexistent.gguf", "--device", "vulkan:999", "-p", "x"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--device vulkan:999: "), std::string::npos) << r.err;
}

// -ngl N: the first layers on the CPU, the last N and the output on the Vulkan device, said once
// on stderr; the bench rows count the device's layers. Without a Vulkan device -ngl is ignored
// with a warning, as llama.cpp ignores it without a GPU.
TEST(GpuLayersFlag, SplitsTheLayersBetweenCpuAndVulkan) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    const auto ignored = run_minfer(
        {"run", model.string(), "-ngl", "3", "--raw", "-p", "Once", "--temp", "0", "-n", "4"});
    ASSERT_EQ(ignored.exit_code, 0) << ignored.err;
    EXPECT_NE(ignored.err.find("warning: -ngl 3 is ignored: --device cpu runs every layer"),
              std::string::npos)
        << ignored.err;
    const auto list = run_minfer({"--list-devices"});
    if (list.out.find("vulkan:0") == std::string::npos) {
        if (test::in_ci()) FAIL() << "no Vulkan device in CI:\n" << list.out;
        GTEST_SKIP() << "no Vulkan device here:\n" << list.out;
    }
    const auto r = run_minfer({"run", model.string(), "--device", "vulkan", "-ngl", "2", "--raw",
                               "-p", "Once", "--temp", "0", "-n", "8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("-ngl 2: layers 0-2 on the CPU, 3-4 and the output on vulkan:0"),
              std::string::npos)
        << r.err;
    const auto cpu =
        run_minfer({"run", model.string(), "--raw", "-p", "Once", "--temp", "0", "-n", "8"});
    ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
    EXPECT_EQ(r.out, cpu.out);  // the same greedy words as the CPU alone

    const auto bench = run_minfer({"bench", model.string(), "--device", "vulkan", "--gpu-layers",
                                   "2", "-p", "8", "-n", "4", "-r", "1", "--json"});
    ASSERT_EQ(bench.exit_code, 0) << bench.err;
    const auto rows = nlohmann::json::parse(bench.out);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0]["backends"], "Vulkan");
    EXPECT_EQ(rows[0]["n_gpu_layers"], 2);
}

TEST(ListDevices, ListsCpuReferenceAndVulkan) {
    const auto r = run_minfer({"--list-devices"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("\n  cpu "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\n  reference "), std::string::npos) << r.out;
    // Mesa's lavapipe, installed by scripts/setup.sh, is a Vulkan device on every machine.
    if (r.out.find("vulkan:0") == std::string::npos) {
        if (test::in_ci()) FAIL() << "no Vulkan device in CI:\n" << r.out;
        GTEST_SKIP() << "no Vulkan device here:\n" << r.out;
    }
    EXPECT_NE(r.out.find("Vulkan 1."), std::string::npos) << r.out;
}

}  // namespace
}  // namespace minfer
