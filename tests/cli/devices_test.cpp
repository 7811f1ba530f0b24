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
