// `minfer pull`, `list`, `rm` and every command's MODEL against a local fake hub and registry
// (tests/hub/fake_hub.py): every reference form, the cache layout huggingface_hub uses, and a
// server that misbehaves on purpose.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "common/fixtures.h"
#include "core/file_io.h"
#include "gguf/gguf_writer.h"
#include "gguf/split_path.h"
#include "hub/hub_harness.h"

namespace minfer::test {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kCommit = commit_id(1);
const std::string kCommitV1 = commit_id(2);
const std::string kCommitPr = commit_id(3);

// The fixtures the fake repositories serve.
struct Fixtures {
    fs::path q8, q4km, q4_0, stories;
    bool present() const { return fs::exists(q8) && fs::exists(q4km) && fs::exists(stories); }
};

Fixtures fixtures() {
    return {fixture_path("models/tiny-llama-q8_0.gguf"),
            fixture_path("models/tiny-llama-q4_k_m.gguf"),
            fixture_path("models/tiny-llama-q4_0.gguf"), fixture_path("models/stories260K.gguf")};
}

#define REQUIRE_MODEL_FIXTURES()                                              \
    MINFER_REQUIRE_FIXTURE(fixture_check_, "models/tiny-llama-q8_0.gguf");    \
    MINFER_REQUIRE_FIXTURE(fixture_check2_, "models/tiny-llama-q4_k_m.gguf"); \
    MINFER_REQUIRE_FIXTURE(fixture_check3_, "models/stories260K.gguf");       \
    (void)fixture_check_;                                                     \
    (void)fixture_check2_;                                                    \
    (void)fixture_check3_;                                                    \
    const Fixtures fx = fixtures()

json file_spec(const fs::path& source) {
    return {{"source", source.string()}};
}

// One repository "test/tiny" with two quantizations and a README, branch main and tag v1.
json base_config(const Fixtures& fx) {
    json files = {{"tiny-Q8_0.gguf", file_spec(fx.q8)},
                  {"tiny-Q4_K_M.gguf", file_spec(fx.q4km)},
                  {"mmproj-tiny-f16.gguf", file_spec(fx.stories)},
                  {"README.md", {{"source", fx.stories.string()}, {"lfs", false}}}};
    json config = {
        {"token", "hf_test_token_0123456789"},
        {"repos",
         {{"test/tiny",
           {{"refs", {{"main", kCommit}, {"v1", kCommitV1}, {"refs/pr/1", kCommitPr}}},
            {"commits",
             {{kCommit, files},
              {kCommitV1, {{"old/tiny-Q8_0.gguf", file_spec(fx.q8)}}},
              {kCommitPr, {{"pr/tiny-Q4_0.gguf", file_spec(fx.q4_0)}}}}},
            {"page_size", 2}}}}},
        {"ollama",
         {{"library/tiny:latest", file_spec(fx.q8)}, {"someone/tiny:q4", file_spec(fx.q4km)}}},
        {"urls", {{"/files/tiny-Q8_0.gguf", {{"source", fx.q8.string()}, {"etag", "\"etag-1\""}}}}},
        {"faults", json::object()},
    };
    return config;
}

void add_repo(json& config, const std::string& repo, const json& files, bool gated = false) {
    config["repos"][repo] = {
        {"refs", {{"main", kCommit}}}, {"commits", {{kCommit, files}}}, {"gated", gated}};
}

std::vector<json> requests_to(const FakeHub& hub, const std::string& port,
                              const std::string& path_part = "") {
    std::vector<json> out;
    for (const auto& r : hub.requests())
        if (r["port"] == port && r["path"].get<std::string>().find(path_part) != std::string::npos)
            out.push_back(r);
    return out;
}

std::string repo_folder(const HubSandbox& box, const std::string& folder = "models--test--tiny") {
    return (box.hf_cache() / folder).string();
}

bool same_bytes(const fs::path& a, const fs::path& b) {
    return read_file(a, "a", std::size_t{1} << 30) == read_file(b, "b", std::size_t{1} << 30);
}

std::string trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
    return s;
}

TEST(HubPull, DownloadsIntoTheHuggingFaceCacheLayout) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    const auto r = box.run({"pull", "hf:test/tiny"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string sha = sha256sum(fx.q4km);
    const fs::path folder = repo_folder(box);
    const fs::path snapshot = folder / "snapshots" / kCommit / "tiny-Q4_K_M.gguf";
    // stdout: the file's path; the default choice among several is Q4_K_M.
    EXPECT_EQ(trimmed(r.out), snapshot.string());
    EXPECT_NE(r.err.find("pulled"), std::string::npos) << r.err;
    // huggingface_hub's layout: blob named by the LFS sha256, a relative symlink, the ref.
    EXPECT_TRUE(fs::is_regular_file(folder / "blobs" / sha));
    ASSERT_TRUE(fs::is_symlink(snapshot));
    EXPECT_EQ(fs::read_symlink(snapshot).string(), "../../blobs/" + sha);
    EXPECT_EQ(read_file(folder / "refs" / "main"), kCommit);  // no newline
    EXPECT_TRUE(same_bytes(snapshot, fx.q4km));
    EXPECT_TRUE(fs::exists(box.hf_cache() / ".locks" / "models--test--tiny" / (sha + ".lock")));
    EXPECT_FALSE(fs::exists(folder / "blobs" / (sha + ".incomplete")));
    // The data came from the other port, without the token; the tree came in pages of 2.
    EXPECT_EQ(requests_to(hub, "data").size(), 1u);
    EXPECT_GE(requests_to(hub, "api", "/tree/").size(), 2u);

    // A second pull asks the hub but fetches nothing.
    hub.clear_requests();
    const auto again = box.run({"pull", "hf:test/tiny"});
    ASSERT_EQ(again.exit_code, 0) << again.err;
    EXPECT_NE(again.err.find("up to date"), std::string::npos) << again.err;
    EXPECT_TRUE(requests_to(hub, "data").empty());
}

TEST(HubPull, EveryReferenceForm) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    struct Case {
        std::string reference;
        fs::path expected_bytes;
    };
    const std::vector<Case> cases = {
        {"hf:test/tiny:q8_0", fx.q8},
        {"hf:test/tiny/tiny-Q4_K_M.gguf", fx.q4km},
        {"hf:test/tiny@v1:Q8_0", fx.q8},
        {"hf:test/tiny@" + kCommitV1 + "/old/tiny-Q8_0.gguf", fx.q8},
        {"hf:test/tiny@refs/pr/1/pr/tiny-Q4_0.gguf", fx.q4_0},
        {"ollama:tiny", fx.q8},
        {"ollama:someone/tiny:q4", fx.q4km},
        {hub.url() + "/files/tiny-Q8_0.gguf", fx.q8},
    };
    for (const auto& c : cases) {
        const auto r = box.run({"pull", c.reference});
        ASSERT_EQ(r.exit_code, 0) << c.reference << ": " << r.err;
        const fs::path path = trimmed(r.out);
        EXPECT_TRUE(same_bytes(path, c.expected_bytes)) << c.reference << " -> " << path;
        // Every command takes the reference as MODEL, from the cache (no request).
        hub.clear_requests();
        const auto info = box.run({"info", c.reference});
        EXPECT_EQ(info.exit_code, 0) << c.reference << ": " << info.err;
        EXPECT_NE(info.out.find("llama"), std::string::npos) << info.out;
        EXPECT_TRUE(hub.requests().empty()) << c.reference << " asked the server again";
    }
    // refs/pr/1 nests under refs/, as huggingface_hub writes it.
    EXPECT_EQ(read_file(fs::path(repo_folder(box)) / "refs" / "refs" / "pr" / "1"), kCommitPr);
    EXPECT_EQ(read_file(fs::path(repo_folder(box)) / "refs" / "v1"), kCommitV1);
    // ollama's layout under MINFER_CACHE.
    const std::string sha = sha256sum(fx.q8);
    EXPECT_TRUE(fs::exists(box.minfer_cache() / "ollama" / "blobs" / ("sha256-" + sha)));
    const std::string host = hub.url().substr(7);
    EXPECT_TRUE(fs::exists(box.minfer_cache() / "ollama" / "manifests" / host / "library" / "tiny" /
                           "latest"));
}

TEST(HubPull, EveryCommandTakesAReference) {
    REQUIRE_MODEL_FIXTURES();
    MINFER_REQUIRE_FIXTURE(f16, "models/tiny-llama-f16.gguf");
    json config = base_config(fx);
    add_repo(config, "test/f16", {{"tiny-F16.gguf", file_spec(f16)}});
    FakeHub hub(config);
    HubSandbox box(hub);
    const std::string ref = "hf:test/tiny:Q8_0";
    // The first command downloads; the others use the cache.
    auto r = box.run({"tokenize", ref, "Hello world", "--ids"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.front(), '[');
    r = box.run({"detokenize", ref, "1,2"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = box.run({"template", ref, "--user", "Hi"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("Hi"), std::string::npos);
    r = box.run({"score", ref, "--prompt", "Hello", "--top", "2", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = box.run({"bench", ref, "-p", "8", "-n", "2", "-r", "1", "-t", "1"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(requests_to(hub, "data").size(), 1u);
    // quantize reads a reference and writes a file; an OUT it cannot write is refused before
    // the download (which may take minutes), not after it.
    hub.clear_requests();
    r = box.run({"quantize", "hf:test/f16", box.hf_cache().string(), "Q8_0"});
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("directory"), std::string::npos) << r.err;
    EXPECT_TRUE(hub.requests().empty());
    const fs::path out = box.path("q.gguf");
    r = box.run({"quantize", "hf:test/f16", out.string(), "Q8_0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(out));
}

// serve downloads its model as it starts, and names it OWNER/REPO:QUANT in /v1/models.
TEST(HubPull, ServeTakesAReference) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    auto server = box.start({"serve", "hf:test/tiny:Q8_0", "--port", "0", "-np", "1"});
    ASSERT_TRUE(wait_until(
        [&] { return server->err_so_far().find("minfer: serving") != std::string::npos; },
        std::chrono::seconds(30)))
        << server->err_so_far();
    server->signal(SIGTERM);
    const auto r = server->wait();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("serving 'test/tiny:Q8_0'"), std::string::npos) << r.err;
    EXPECT_EQ(requests_to(hub, "data").size(), 1u);
    EXPECT_TRUE(
        same_bytes(fs::path(repo_folder(box)) / "snapshots" / kCommit / "tiny-Q8_0.gguf", fx.q8));
}

TEST(HubPull, ChoosesOrExplains) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    add_repo(config, "test/two",
             {{"a-Q8_0.gguf", file_spec(fx.q8)}, {"b-Q8_0.gguf", file_spec(fx.q8)}});
    add_repo(config, "test/one",
             {{"mmproj-x-f16.gguf", file_spec(fx.stories)}, {"x-Q8_0.gguf", file_spec(fx.q8)}});
    FakeHub hub(config);
    HubSandbox box(hub);
    auto r = box.run({"pull", "hf:test/two"});
    EXPECT_EQ(r.exit_code, 2) << r.err;  // several: the user must choose
    EXPECT_NE(r.err.find("a-Q8_0.gguf, b-Q8_0.gguf"), std::string::npos) << r.err;
    r = box.run({"pull", "hf:test/tiny:Q4_K"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no model file tagged Q4_K"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("tiny-Q4_K_M.gguf"), std::string::npos) << r.err;
    r = box.run({"pull", "hf:test/one"});  // the projector is never the model
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("x-Q8_0.gguf"), std::string::npos);
    r = box.run({"pull", "hf:test/missing"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no such repository"), std::string::npos) << r.err;
    r = box.run({"pull", "hf:test/tiny@nope:Q8_0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("no such revision"), std::string::npos) << r.err;
    r = box.run({"pull", "ollama:nothing:here"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("ollama:nothing:here: the model is not in the registry"),
              std::string::npos)
        << r.err;
    r = box.run({"pull", "tiny.gguf"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("is a local path"), std::string::npos) << r.err;
    hub.clear_requests();
    r = box.run({"pull", "hf:test/../x"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(hub.requests().empty());  // refused before any request
}

// A split set written for the test: three parts of one small model.
void write_split_model(const fs::path& dir) {
    static const std::vector<float> data(64, 0.5f);
    for (int i = 0; i < 3; ++i) {
        GgufWriter w;
        w.metadata().set("general.architecture", GgufValue::string("llama"));
        w.metadata().set("split.no", GgufValue::of<uint16_t>(static_cast<uint16_t>(i)));
        w.metadata().set("split.count", GgufValue::of<uint16_t>(3));
        w.metadata().set("split.tensors.count", GgufValue::of<int32_t>(3));
        w.add_tensor("t" + std::to_string(i), GgmlType::F32, {64}, std::as_bytes(std::span(data)));
        w.write_file(split_part_path((dir / "split-Q8_0").string(), i + 1, 3));
    }
}

TEST(HubPull, SplitModelComesWhole) {
    REQUIRE_MODEL_FIXTURES();
    TempDir parts;
    write_split_model(parts.path());
    json config = base_config(fx);
    json files = json::object();
    for (int i = 1; i <= 3; ++i) {
        const auto p = split_part_path((parts / "split-Q8_0").string(), i, 3);
        files["Q8_0/" + p.filename().string()] = file_spec(p);
    }
    files["other-F16.gguf"] = file_spec(fx.q8);
    add_repo(config, "test/split", files);
    FakeHub hub(config);
    HubSandbox box(hub);
    // Naming the second part brings all three and opens the first.
    const auto r = box.run({"info", "hf:test/split/Q8_0/split-Q8_0-00002-of-00003.gguf"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("3 part(s)"), std::string::npos) << r.out;
    EXPECT_EQ(requests_to(hub, "data").size(), 3u);
    const auto q = box.run({"info", "hf:test/split:Q8_0"});
    ASSERT_EQ(q.exit_code, 0) << q.err;
    EXPECT_NE(q.out.find("3 part(s)"), std::string::npos) << q.out;
    EXPECT_EQ(requests_to(hub, "data").size(), 3u);  // nothing new
}

TEST(HubPull, ResumesAfterADroppedConnection) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"drop_after", 1000000}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q8));
    const auto data = requests_to(hub, "data");
    ASSERT_EQ(data.size(), 2u);
    EXPECT_EQ(data[0]["bytes"], 1000000);
    EXPECT_EQ(data[1]["range"], "bytes=1000000-");  // resumed, not restarted
    EXPECT_EQ(data[1]["bytes"].get<uint64_t>() + 1000000, fs::file_size(fx.q8));
    EXPECT_NE(r.err.find("retrying"), std::string::npos) << r.err;
}

TEST(HubPull, RetriesServerErrorsAndHonoursRetryAfter) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"status", {500, 429}}, {"retry_after", 1}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto data = requests_to(hub, "data");
    ASSERT_EQ(data.size(), 3u);
    EXPECT_EQ(data[0]["status"], 500);
    EXPECT_EQ(data[1]["status"], 429);
    EXPECT_EQ(data[2]["status"], 200);
    // The 429 asked for one second.
    EXPECT_GE(data[2]["time"].get<double>() - data[1]["time"].get<double>(), 0.95);
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q8));
}

TEST(HubPull, GivesUpWithAMessageAfterTheRetries) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"status", {503, 503, 503, 503, 503}}};
    config["faults"]["test/tiny/tiny-Q4_K_M.gguf"] = {{"status", {429}}, {"retry_after", 100000}};
    FakeHub hub(config);
    HubSandbox box(hub);
    auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("HTTP 503"), std::string::npos) << r.err;
    EXPECT_EQ(requests_to(hub, "data").size(), 4u);  // the first try and 3 retries
    // A Retry-After beyond the limit is not waited for.
    r = box.run({"pull", "hf:test/tiny:Q4_K_M"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_LT(r.seconds, 30);
    EXPECT_NE(r.err.find("retry in 100000 s"), std::string::npos) << r.err;
}

TEST(HubPull, DetectsAStall) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"stall_after", 500000}, {"stall_seconds", 8}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("sent nothing for 1 s"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 6);  // did not wait for the server to give up
    // (The stalled request is logged when the server gives up on it, after the test.)
    const auto data = requests_to(hub, "data");
    ASSERT_EQ(data.size(), 1u);
    EXPECT_EQ(data[0]["range"], "bytes=500000-");
    EXPECT_EQ(data[0]["bytes"].get<uint64_t>() + 500000, fs::file_size(fx.q8));
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q8));
}

TEST(HubPull, StartsOverWhenTheServerIgnoresRange) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"drop_after", 700000}, {"ignore_range", true}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("ignored the range request"), std::string::npos) << r.err;
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q8));
}

TEST(HubPull, NeverKeepsBytesThatDoNotMatch) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    // Announced checksum differs / announced size differs / bytes corrupted on the way.
    config["repos"]["test/tiny"]["commits"][kCommit]["tiny-Q8_0.gguf"]["sha256"] =
        std::string(64, 'e');
    config["repos"]["test/tiny"]["commits"][kCommit]["tiny-Q4_K_M.gguf"]["size"] = 1234;
    config["faults"]["ollama:" + sha256sum(fx.q8)] = {{"corrupt", true}, {"times", 100}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const fs::path blobs = fs::path(repo_folder(box)) / "blobs";

    auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("but " + std::string(64, 'e') + " was announced; the file was deleted"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(blobs / std::string(64, 'e')));
    EXPECT_FALSE(fs::exists(blobs / (std::string(64, 'e') + ".incomplete")));

    r = box.run({"pull", "hf:test/tiny:Q4_K_M"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("but 1234 were announced"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("deleted"), std::string::npos) << r.err;

    r = box.run({"pull", "ollama:tiny"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("the file was deleted"), std::string::npos) << r.err;
    // Nothing bad is left under a final name anywhere.
    for (const auto& root : {box.hf_cache(), box.minfer_cache()}) {
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(root, ec);
             !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
            const std::string name = it->path().filename().string();
            const bool blob_name =
                (name.starts_with("sha256-") && !name.ends_with(".lock")) || name.size() == 64;
            EXPECT_FALSE(it->is_regular_file() && blob_name) << it->path();
        }
    }
}

TEST(HubPull, RefusesPathsFromTheServerThatLeaveTheCache) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    add_repo(config, "test/evil", {{"../../../escaped-Q4_K_M.gguf", file_spec(fx.q8)}});
    add_repo(config, "test/evil2", {{"a\x1b[31m-Q4_K_M.gguf", file_spec(fx.q8)}});
    add_repo(config, "test/badsha", {{"m-Q8_0.gguf", file_spec(fx.q8)}});
    config["repos"]["test/badsha"]["sha_override"] = "../../../../tmp/x";
    config["repos"]["test/nextpage"] = config["repos"]["test/tiny"];
    config["repos"]["test/nextpage"]["next_host"] = "evil.example:80";
    config["ollama"]["library/evil:latest"] = {
        {"manifest",
         R"({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:../../../../escaped", "size": 10}]})"}};
    FakeHub hub(config);
    HubSandbox box(hub);
    for (const auto& [ref, message] : std::vector<std::pair<std::string, std::string>>{
             {"hf:test/evil", "unsafe path"},
             {"hf:test/evil2", "unsafe path"},
             {"hf:test/badsha", "not a 40-digit commit id"},
             {"hf:test/nextpage:Q8_0", "next page of the file list is not on"},
             {"ollama:evil", "not sha256:"}}) {
        const auto r = box.run({"pull", ref});
        EXPECT_EQ(r.exit_code, 1) << ref;
        EXPECT_NE(r.err.find(message), std::string::npos) << ref << ": " << r.err;
        EXPECT_EQ(r.err.find('\x1b'), std::string::npos);  // escaped on the terminal
    }
    EXPECT_TRUE(requests_to(hub, "data").empty());
    EXPECT_FALSE(fs::exists(box.path("escaped-Q4_K_M.gguf")));
    EXPECT_FALSE(fs::exists(box.hf_cache().parent_path().parent_path() / "escaped-Q4_K_M.gguf"));
}

TEST(HubPull, GatedRepositoryAndTheToken) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    add_repo(config, "test/gated", {{"g-Q8_0.gguf", file_spec(fx.q8)}}, /*gated=*/true);
    FakeHub hub(config);
    HubSandbox box(hub);
    auto r = box.run({"pull", "hf:test/gated"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("gated: accept its licence at " + hub.url() + "/test/gated"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("set HF_TOKEN"), std::string::npos) << r.err;

    const std::string token = "hf_test_token_0123456789";
    box.env["HF_TOKEN"] = token;
    hub.clear_requests();
    r = box.run({"pull", "hf:test/gated"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // The token went to the hub's API, never to the host the data came from.
    EXPECT_FALSE(requests_to(hub, "api", "/api/models/test/gated").empty());
    for (const auto& q : requests_to(hub, "api", "/api/models/test/gated")) EXPECT_TRUE(q["auth"]);
    ASSERT_FALSE(requests_to(hub, "data").empty());
    for (const auto& q : requests_to(hub, "data")) EXPECT_FALSE(q["auth"]) << q.dump();

    // A wrong token: the cached model still runs (no request); pull says what is wrong without
    // quoting the token.
    box.env["HF_TOKEN"] = "hf_wrong_secret_987";
    r = box.run({"info", "hf:test/gated"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = box.run({"pull", "hf:test/gated"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("HF_TOKEN belongs to"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("hf_wrong_secret_987"), std::string::npos);

    // The token from huggingface-cli's file works too.
    box.env["HF_TOKEN"] = "";
    fs::create_directories(box.path("hf-home"));
    std::ofstream(box.path("hf-home") / "token") << token << "\n";
    r = box.run({"pull", "hf:test/gated"});
    EXPECT_EQ(r.exit_code, 0) << r.err;

    // Never in the cache, the record or any output.
    EXPECT_TRUE(files_containing(box.hf_cache(), token).empty());
    EXPECT_TRUE(files_containing(box.minfer_cache(), token).empty());
    const auto listed = box.run({"list", "--json"});
    EXPECT_EQ(listed.out.find(token), std::string::npos);
    EXPECT_EQ(r.err.find(token), std::string::npos);
    EXPECT_EQ(r.out.find(token), std::string::npos);
}

TEST(HubPull, ResumesAfterSigkill) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"rate", 1000000}, {"times", 1}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const std::string sha = sha256sum(fx.q8);
    const fs::path partial = fs::path(repo_folder(box)) / "blobs" / (sha + ".incomplete");
    auto child = box.start({"pull", "hf:test/tiny:Q8_0"});
    ASSERT_TRUE(wait_until(
        [&] {
            std::error_code ec;
            return fs::file_size(partial, ec) >= 1000000 && !ec;
        },
        std::chrono::seconds(20)));
    child->signal(SIGKILL);
    const auto killed = child->wait();
    EXPECT_EQ(killed.exit_code, 128 + SIGKILL);
    const uint64_t kept = fs::file_size(partial);
    ASSERT_GE(kept, 1000000u);
    ASSERT_LT(kept, fs::file_size(fx.q8));

    config["faults"] = json::object();  // full speed now
    hub.set_config(config);
    const auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("resumed after"), std::string::npos) << r.err;
    // The resumed request (the killed one is logged whenever its server thread notices).
    std::vector<json> resumed;
    for (const auto& q : requests_to(hub, "data"))
        if (!q["range"].is_null()) resumed.push_back(q);
    ASSERT_EQ(resumed.size(), 1u);
    EXPECT_EQ(resumed[0]["range"], "bytes=" + std::to_string(kept) + "-");
    EXPECT_EQ(resumed[0]["bytes"].get<uint64_t>(), fs::file_size(fx.q8) - kept);
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q8));
    EXPECT_FALSE(fs::exists(partial));
}

TEST(HubPull, CtrlCLeavesAResumableFile) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"rate", 1000000}, {"times", 1}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const fs::path partial =
        fs::path(repo_folder(box)) / "blobs" / (sha256sum(fx.q8) + ".incomplete");
    auto child = box.start({"run", "hf:test/tiny:Q8_0", "-p", "Hi", "-n", "1"});
    ASSERT_TRUE(wait_until(
        [&] {
            std::error_code ec;
            return fs::file_size(partial, ec) >= 300000 && !ec;
        },
        std::chrono::seconds(20)));
    child->signal(SIGINT);
    const auto r = child->wait();
    EXPECT_EQ(r.exit_code, 130) << r.err;
    EXPECT_NE(r.err.find("the next run resumes"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(partial));
}

TEST(HubPull, TwoProcessesPullingTheSameFileDownloadItOnce) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["faults"]["test/tiny/tiny-Q8_0.gguf"] = {{"rate", 3000000}, {"times", 5}};
    FakeHub hub(config);
    HubSandbox box(hub);
    auto first = box.start({"pull", "hf:test/tiny:Q8_0"});
    auto second = box.start({"pull", "hf:test/tiny:Q8_0"});
    const auto a = first->wait();
    const auto b = second->wait();
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_TRUE(same_bytes(trimmed(a.out), fx.q8));
    EXPECT_EQ(requests_to(hub, "data").size(), 1u);
    EXPECT_NE((a.err + b.err).find("waiting for another process"), std::string::npos)
        << a.err << b.err;
}

TEST(HubPull, OfflineAndUnreachable) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    box.env["HF_HUB_OFFLINE"] = "1";
    auto r = box.run({"info", "hf:test/tiny:Q8_0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("HF_HUB_OFFLINE is set"), std::string::npos) << r.err;
    EXPECT_TRUE(hub.requests().empty());

    box.env["HF_HUB_OFFLINE"] = "";
    ASSERT_EQ(box.run({"pull", "hf:test/tiny"}).exit_code, 0);
    ASSERT_EQ(box.run({"pull", "ollama:tiny"}).exit_code, 0);
    hub.clear_requests();
    box.env["HF_HUB_OFFLINE"] = "1";
    // The same choice offline as online: the saved file list says Q4_K_M.
    r = box.run({"pull", "hf:test/tiny"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("tiny-Q4_K_M.gguf"), std::string::npos);
    r = box.run({"run", "hf:test/tiny", "-p", "Hello", "-n", "2", "--temp", "0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(hub.requests().empty());

    // With the hub unreachable, a cached reference still works; pull says why it cannot check.
    box.env["HF_HUB_OFFLINE"] = "";
    box.env["HF_ENDPOINT"] = "http://127.0.0.1:9";  // discard port: connection refused
    r = box.run({"info", "hf:test/tiny"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    // pull of a cached model succeeds: the copy works, its freshness is unknown.
    r = box.run({"pull", "hf:test/tiny"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("could not be reached"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("whether a newer one exists is unknown"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("tiny-Q4_K_M.gguf"), std::string::npos) << r.out;
    r = box.run({"info", "hf:test/tiny:Q8_0"});  // not cached
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("127.0.0.1"), std::string::npos) << r.err;
    r = box.run({"pull", "hf:test/tiny:Q8_0"});  // its commit is cached, the file is not
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.find("unknown"), std::string::npos) << r.err;
    // The same for the registry. Its manifests are kept by registry host: the pulled one is
    // copied to where an unreachable registry on port 9 would have left it.
    const fs::path manifests = box.minfer_cache() / "ollama" / "manifests";
    fs::copy(manifests / hub.url().substr(7), manifests / "127.0.0.1:9",
             fs::copy_options::recursive);
    box.env["MINFER_OLLAMA_REGISTRY"] = "http://127.0.0.1:9";
    r = box.run({"pull", "ollama:tiny"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("ollama:tiny: the server could not be reached"), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("the cached copy"), std::string::npos) << r.err;
    r = box.run({"pull", "ollama:someone/tiny:q4"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.find("cached copy"), std::string::npos) << r.err;

    // A host name that does not resolve (.invalid never does) is not retried: offline or
    // misspelt, five retries with backoff only delayed the error by 31 s.
    r = box.run({"info", "http://minfer-test.invalid/model.gguf"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.find("retrying"), std::string::npos) << r.err;
    EXPECT_LT(r.seconds, 10);
}

TEST(HubPull, ReusesAHuggingFaceCliCache) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    // What huggingface-cli download test/tiny tiny-Q8_0.gguf leaves behind.
    const std::string sha = sha256sum(fx.q8);
    const fs::path folder = repo_folder(box);
    fs::create_directories(folder / "blobs");
    fs::create_directories(folder / "snapshots" / kCommit);
    fs::create_directories(folder / "refs");
    fs::copy_file(fx.q8, folder / "blobs" / sha);
    fs::create_symlink("../../blobs/" + sha, folder / "snapshots" / kCommit / "tiny-Q8_0.gguf");
    std::ofstream(folder / "refs" / "main") << kCommit;

    box.env["HF_HUB_OFFLINE"] = "1";
    auto r = box.run({"info", "hf:test/tiny:Q8_0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    box.env["HF_HUB_OFFLINE"] = "";
    r = box.run({"pull", "hf:test/tiny:Q8_0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("up to date"), std::string::npos) << r.err;
    EXPECT_TRUE(requests_to(hub, "data").empty());
    // A blob already there under another commit is linked, not fetched.
    r = box.run({"pull", "hf:test/tiny@v1:Q8_0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(requests_to(hub, "data").empty());
    EXPECT_EQ(fs::read_symlink(folder / "snapshots" / kCommitV1 / "old" / "tiny-Q8_0.gguf"),
              "../../../blobs/" + sha);
}

TEST(HubPull, ListAndRemove) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    // Neither its name nor its metadata (no general.file_type) tells the quantization.
    add_repo(config, "test/plain", {{"model.gguf", file_spec(fx.stories)}});
    FakeHub hub(config);
    HubSandbox box(hub);
    ASSERT_EQ(box.run({"pull", "hf:test/plain"}).exit_code, 0);
    ASSERT_EQ(box.run({"pull", "hf:test/tiny:Q8_0"}).exit_code, 0);
    ASSERT_EQ(box.run({"pull", "hf:test/tiny@v1:Q8_0"}).exit_code, 0);  // the same blob
    ASSERT_EQ(box.run({"pull", "hf:test/tiny"}).exit_code, 0);
    ASSERT_EQ(box.run({"pull", "ollama:tiny"}).exit_code, 0);

    auto listed = box.run({"list", "--json"});
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    const json models = json::parse(listed.out);
    std::map<std::string, json> by_ref;
    for (const auto& m : models) by_ref[m["reference"]] = m;
    ASSERT_TRUE(by_ref.contains("hf:test/tiny:Q8_0")) << listed.out;
    ASSERT_TRUE(by_ref.contains("hf:test/tiny")) << listed.out;
    ASSERT_TRUE(by_ref.contains("ollama:tiny")) << listed.out;
    EXPECT_EQ(by_ref["hf:test/tiny:Q8_0"]["size"], fs::file_size(fx.q8));
    EXPECT_EQ(by_ref["hf:test/tiny:Q8_0"]["quantization"], "Q8_0");
    EXPECT_EQ(by_ref["hf:test/tiny"]["quantization"], "Q4_K_M");
    EXPECT_EQ(by_ref["ollama:tiny"]["quantization"], "Q8_0");  // from the GGUF metadata
    EXPECT_TRUE(by_ref["ollama:tiny"]["last_used"].is_string());
    EXPECT_TRUE(by_ref["hf:test/plain"]["quantization"].is_null()) << listed.out;
    const auto text = box.run({"list"});
    EXPECT_NE(text.out.find("REFERENCE"), std::string::npos);
    EXPECT_NE(text.out.find("tiny-Q4_K_M.gguf"), std::string::npos) << text.out;

    const std::string sha = sha256sum(fx.q8);
    const fs::path blob = fs::path(repo_folder(box)) / "blobs" / sha;
    // The v1 reference still uses the Q8_0 blob: kept.
    auto r = box.run({"rm", "hf:test/tiny:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::exists(blob));
    r = box.run({"rm", "hf:test/tiny@v1:Q8_0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(blob));
    EXPECT_NE(r.out.find("freed"), std::string::npos);
    r = box.run({"rm", "hf:test/tiny"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(repo_folder(box)));  // nothing left of the repository
    r = box.run({"rm", "ollama:tiny", "hf:test/plain"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(fs::exists(box.minfer_cache() / "ollama" / "blobs" / ("sha256-" + sha)));
    listed = box.run({"list", "--json"});
    EXPECT_EQ(json::parse(listed.out).size(), 0u) << listed.out;
    r = box.run({"rm", "hf:test/tiny"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not in the cache"), std::string::npos);
    r = box.run({"rm", "some/file.gguf"});
    EXPECT_EQ(r.exit_code, 2);
}

TEST(HubPull, UsesOllamasOwnStoreInPlace) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    // An ollama install that already has the model.
    const std::string sha = sha256sum(fx.q8);
    const fs::path store = box.path("ollama-models");
    const std::string host = hub.url().substr(7);
    fs::create_directories(store / "blobs");
    fs::create_directories(store / "manifests" / host / "library" / "tiny");
    fs::copy_file(fx.q8, store / "blobs" / ("sha256-" + sha));
    std::ofstream(store / "manifests" / host / "library" / "tiny" / "latest")
        << R"({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)"
        << sha << R"(", "size": )" << fs::file_size(fx.q8) << "}]}";
    fs::permissions(store / "blobs" / ("sha256-" + sha), fs::perms::owner_read);
    box.env["HF_HUB_OFFLINE"] = "1";
    auto r = box.run({"info", "ollama:tiny"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    r = box.run({"rm", "ollama:tiny"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("ollama rm"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(store / "blobs" / ("sha256-" + sha)));
}

TEST(HubPull, UrlsAreRevalidatedByETag) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    const std::string url = hub.url() + "/files/tiny-Q8_0.gguf";
    ASSERT_EQ(box.run({"pull", url}).exit_code, 0);
    hub.clear_requests();
    auto r = box.run({"pull", url});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto api = requests_to(hub, "api");
    ASSERT_EQ(api.size(), 1u);
    EXPECT_EQ(api[0]["if_none_match"], "\"etag-1\"");
    EXPECT_EQ(api[0]["status"], 304);
    EXPECT_NE(r.err.find("up to date"), std::string::npos) << r.err;

    // The server's file changed (a new ETag): fetched again and the cached copy replaced; then,
    // a server that sends no Content-Length: the size is what arrived before the close.
    json config = hub.config();
    config["urls"]["/files/tiny-Q8_0.gguf"] = {{"source", fx.q4km.string()},
                                               {"etag", "\"etag-2\""}};
    config["urls"]["/files/nolength-Q8_0.gguf"] = {{"source", fx.q8.string()}};
    config["faults"]["/files/nolength-Q8_0.gguf"] = {{"no_length", true}};
    hub.set_config(config);
    r = box.run({"pull", url});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("pulled"), std::string::npos) << r.err;
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q4km));
    r = box.run({"pull", hub.url() + "/files/nolength-Q8_0.gguf"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(same_bytes(trimmed(r.out), fx.q8));
}

TEST(HubPull, FreeSpaceIsCheckedFirst) {
    REQUIRE_MODEL_FIXTURES();
    json config = base_config(fx);
    config["repos"]["test/tiny"]["commits"][kCommit]["tiny-Q8_0.gguf"]["size"] = uint64_t{1}
                                                                                 << 52;  // 4 PiB
    FakeHub hub(config);
    HubSandbox box(hub);
    const auto r = box.run({"pull", "hf:test/tiny:Q8_0"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("not enough disk space"), std::string::npos) << r.err;
    EXPECT_TRUE(requests_to(hub, "data").empty());
}

// A small real file system for the cache: a tmpfs in a user and mount namespace of its own
// (unshare -rm: no root needed, nothing outside the test sees it). `script` runs inside with
// "$1" the minfer binary, "$2" the URL to pull, "$3" the file the hub serves; it mounts the
// tmpfs itself ("$MINFER_CACHE"), so that it can grow it between runs.
MinferRun run_in_small_file_system(const HubSandbox& box, const std::string& script,
                                   const std::string& url, const fs::path& source) {
    return box.run_program({"/usr/bin/unshare", "-rm", "/bin/sh", "-c", script, "sh",
                            MINFER_BINARY, url, source.string()});
}

bool can_mount_a_small_file_system() {
    return std::system("/usr/bin/unshare -rm /bin/sh -c 'mount -t tmpfs -o size=1m none /mnt' "
                       ">/dev/null 2>&1") == 0;
}

#define REQUIRE_SMALL_FILE_SYSTEM()                                                      \
    if (!can_mount_a_small_file_system()) {                                              \
        if (in_ci()) FAIL() << "unshare -rm cannot mount a tmpfs: no full disk to test"; \
        GTEST_SKIP() << "unshare -rm cannot mount a tmpfs here (user namespaces off)";   \
    }

// The disk fills during a download whose size the server does not announce (so nothing could be
// checked before it started): the pull stops with one message that says what was kept and what
// is unknown, the partial file stays, and once there is room the next run resumes from it.
TEST(HubPull, AFullDiskStopsADownloadOfUnknownSizeAndTheNextRunResumes) {
    REQUIRE_MODEL_FIXTURES();
    REQUIRE_SMALL_FILE_SYSTEM();
    json config = base_config(fx);
    config["urls"]["/files/nolength-Q8_0.gguf"] = {{"source", fx.q8.string()}};
    // Slower than the disk (8 MB/s), so that the disk fills while the size is still unknown.
    config["faults"]["/files/nolength-Q8_0.gguf"] = {{"no_length", true}, {"rate", 8000000}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const std::string script = R"(
        mkdir -p "$MINFER_CACHE" && mount -t tmpfs -o size=2m minfer-test "$MINFER_CACHE" || exit 99
        "$1" pull "$2"
        echo "first pull exit $?" >&2
        find "$MINFER_CACHE" -name '*.incomplete' -printf 'partial file bytes %s\n' >&2
        mount -o remount,size=16m "$MINFER_CACHE" || exit 99
        path=$("$1" pull "$2") || exit 1
        cmp "$path" "$3" >&2 && echo "second pull complete" >&2
    )";
    const auto r = run_in_small_file_system(box, script, hub.url() + "/files/nolength-Q8_0.gguf",
                                            fx.q8);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("first pull exit 1"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("is full (No space left on device)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the next run resumes there"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("its size was not announced"), std::string::npos) << r.err;
    // The partial file holds what was written (most of the 2 MiB), and the second run asked only
    // for the rest.
    const std::size_t kept_at = r.err.find("partial file bytes ");
    ASSERT_NE(kept_at, std::string::npos) << r.err;
    const uint64_t kept = std::stoull(r.err.substr(kept_at + 19));
    EXPECT_GT(kept, uint64_t{1} << 20) << r.err;
    EXPECT_NE(r.err.find("second pull complete"), std::string::npos) << r.err;
    bool resumed = false;
    for (const auto& request : requests_to(hub, "api", "nolength"))
        if (request["range"] == "bytes=" + std::to_string(kept) + "-") resumed = true;
    EXPECT_TRUE(resumed) << "no request for the bytes after the kept " << kept;
}

// Without an announced size the margin a sized download keeps (64 MiB) is checked as the bytes
// arrive: on a 72 MiB file system, a 100 MiB file stops before the disk is full.
TEST(HubPull, ADownloadOfUnknownSizeKeepsTheFreeSpaceMargin) {
    REQUIRE_MODEL_FIXTURES();
    REQUIRE_SMALL_FILE_SYSTEM();
    TempDir dir;
    const fs::path big = dir.path() / "big.gguf";
    { std::ofstream create(big); }
    fs::resize_file(big, uint64_t{100} << 20);  // sparse: quick to make and to serve
    json config = base_config(fx);
    config["urls"]["/files/big.gguf"] = {{"source", big.string()}};
    config["faults"]["/files/big.gguf"] = {{"no_length", true}};
    FakeHub hub(config);
    HubSandbox box(hub);
    const std::string script = R"(
        mkdir -p "$MINFER_CACHE" && mount -t tmpfs -o size=72m minfer-test "$MINFER_CACHE" || exit 99
        "$1" pull "$2"
        echo "pull exit $?" >&2
        df -k "$MINFER_CACHE" | awk 'NR == 2 { print "free KiB " $4 }' >&2
    )";
    const auto r = run_in_small_file_system(box, script, hub.url() + "/files/big.gguf", big);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("pull exit 1"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fewer than 64 MiB are left on the disk"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the next run resumes there"), std::string::npos) << r.err;
    const std::size_t free_at = r.err.find("free KiB ");
    ASSERT_NE(free_at, std::string::npos) << r.err;
    EXPECT_GT(std::stoull(r.err.substr(free_at + 9)), uint64_t{32} << 10) << r.err;
}

TEST(HubPull, DefaultModelForRunAndChat) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    box.env["MINFER_DEFAULT_MODEL"] = "hf:test/tiny:Q8_0";
    auto r = box.run({"run", "-p", "Once upon a time", "-n", "3", "--temp", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("loaded hf:test/tiny:Q8_0"), std::string::npos) << r.err;
    r = box.run({"chat", "-n", "2", "--temp", "0"});
    EXPECT_EQ(r.exit_code, 0) << r.err;  // stdin is empty: no message, a clean end
    // Without MINFER_DEFAULT_MODEL the documented default is asked for.
    box.env["MINFER_DEFAULT_MODEL"] = "";
    r = box.run({"run", "-p", "Hi"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"), std::string::npos) << r.err;
    // A malformed default names the variable it came from, before anything is requested. (The
    // server logs a request after answering it: the last one is waited for before clearing.)
    wait_until([&] { return !requests_to(hub, "api", "Qwen").empty(); }, std::chrono::seconds(5));
    hub.clear_requests();
    box.env["MINFER_DEFAULT_MODEL"] = "hf:../x";
    r = box.run({"chat", "-n", "2"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("MINFER_DEFAULT_MODEL: 'hf:../x'"), std::string::npos) << r.err;
    EXPECT_TRUE(hub.requests().empty());
}

// rm while another process downloads the same blob (here: holds its download lock, as a pull
// does from its first byte to the rename): rm waits for it, saying so, and removes afterwards,
// so a finishing download cannot put its blob back after the removal.
TEST(HubPull, RmWaitsForADownloadOfTheSameFile) {
    REQUIRE_MODEL_FIXTURES();
    FakeHub hub(base_config(fx));
    HubSandbox box(hub);
    ASSERT_EQ(box.run({"pull", "hf:test/tiny:Q8_0"}).exit_code, 0);
    const std::string sha = sha256sum(fx.q8);
    const fs::path blob = fs::path(repo_folder(box)) / "blobs" / sha;
    const fs::path lock = box.hf_cache() / ".locks" / "models--test--tiny" / (sha + ".lock");
    fs::create_directories(lock.parent_path());
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);

    auto child = box.start({"rm", "hf:test/tiny:Q8_0"});
    EXPECT_TRUE(wait_until([&] { return child->err_so_far().find("waiting") != std::string::npos; },
                           std::chrono::seconds(20)))
        << child->err_so_far();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(fs::exists(blob));  // nothing removed while the download runs

    ::flock(fd, LOCK_UN);
    ::close(fd);
    const auto r = child->wait();
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("removed hf:test/tiny:Q8_0"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(blob));
}

}  // namespace
}  // namespace minfer::test
