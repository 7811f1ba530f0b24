// What the hub and the registry send is hostile until checked: JSON answers, Link headers,
// manifests, and the environment's settings.

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "hub/digest.h"
#include "hub/hf_api.h"
#include "hub/hub_settings.h"
#include "hub/ollama.h"

namespace minfer::hub {
namespace {

const std::string kSha(64, 'a');
const std::string kOid(40, 'b');

std::string format_error(const std::function<void()>& f) {
    try {
        f();
    } catch (const FormatError& e) {
        return e.what();
    }
    return "(accepted)";
}

TEST(TreePage, ParsesFilesAndSkipsDirectories) {
    const std::string json = R"([
        {"type": "directory", "oid": ")" +
                             kOid + R"(", "size": 0, "path": "sub"},
        {"type": "file", "oid": ")" +
                             kOid + R"(", "size": 12, "path": "sub/m-Q8_0.gguf",
         "lfs": {"oid": ")" + kSha +
                             R"(", "size": 12, "pointerSize": 134}},
        {"type": "file", "oid": ")" +
                             kOid + R"(", "size": 5, "path": "README.md", "lfs": null}
    ])";
    const auto files = parse_tree_page(json);
    ASSERT_EQ(files.size(), 2u);
    EXPECT_EQ(files[0].path, "sub/m-Q8_0.gguf");
    EXPECT_EQ(files[0].size, 12u);
    EXPECT_EQ(files[0].blob_id, kSha);
    EXPECT_EQ(files[0].digest.kind, DigestKind::Sha256);
    EXPECT_EQ(files[1].blob_id, kOid);
    EXPECT_EQ(files[1].digest.kind, DigestKind::GitSha1);
}

TEST(TreePage, RefusesHostileEntries) {
    const auto entry = [](const std::string& fields) {
        return "[{\"type\": \"file\", " + fields + "}]";
    };
    const std::string ok_oid = "\"oid\": \"" + kOid + "\"";
    struct Case {
        std::string json;
        const char* message_part;
    };
    for (const Case& c : std::vector<Case>{
             {entry(ok_oid + R"(, "size": 1, "path": "../../etc/passwd.gguf")"), "unsafe path"},
             {entry(ok_oid + R"(, "size": 1, "path": "/abs.gguf")"), "unsafe path"},
             {entry(ok_oid + R"(, "size": 1, "path": "a\\b.gguf")"), "unsafe path"},
             {entry(ok_oid + R"(, "size": 1, "path": "a\u001b[2J.gguf")"), "unsafe path"},
             {entry(ok_oid + R"(, "size": -1, "path": "a.gguf")"), "not a file size"},
             {entry(ok_oid + R"(, "size": 1e300, "path": "a.gguf")"), "not a file size"},
             {entry(ok_oid + R"(, "size": 18446744073709551615, "path": "a.gguf")"),
              "not a file size"},
             {entry(ok_oid + R"(, "size": "12", "path": "a.gguf")"), "not a file size"},
             {entry(R"("oid": "zz", "size": 1, "path": "a.gguf")"), "not a git blob id"},
             {entry(ok_oid + R"(, "size": 1, "path": 7)"), "'path' is missing"},
             {entry(ok_oid + R"(, "size": 1, "path": "a.gguf", "lfs": {"oid": "../x", "size": 1})"),
              "not a sha256"},
             {entry(ok_oid + R"(, "size": 1, "path": "a.gguf", "lfs": {"oid": ")" + kSha +
                    R"(", "size": 2})"),
              "sizes disagree"},
             {R"({"error": "x"})", "not a JSON array"},
             {"[1, 2]", "non-object entry"},
             {"[{\"type\": 1}]", "'type' is missing"},
             {"not json", "not valid JSON"},
             {std::string(100, '[') + std::string(100, ']'), "nested too deeply"},
         }) {
        const std::string error = format_error([&] { parse_tree_page(c.json); });
        EXPECT_NE(error.find(c.message_part), std::string::npos) << c.json << " -> " << error;
    }
}

TEST(RevisionInfo, CommitMustBeACommitId) {
    EXPECT_EQ(parse_revision_commit(R"({"sha": ")" + kOid + R"(", "id": "o/r"})"), kOid);
    EXPECT_NE(format_error([] {
                  parse_revision_commit(R"({"sha": "../../../tmp/x"})");
              }).find("not a 40-digit commit id"),
              std::string::npos);
    EXPECT_NE(format_error([] { parse_revision_commit(R"({"sha": 5})"); }).find("'sha'"),
              std::string::npos);
    EXPECT_NE(format_error([] { parse_revision_commit("[]"); }).find("not a JSON object"),
              std::string::npos);
}

TEST(LinkHeader, FindsTheNextPage) {
    EXPECT_EQ(next_page_link(R"(<https://h/api/x?cursor=2>; rel="next")"),
              "https://h/api/x?cursor=2");
    EXPECT_EQ(next_page_link(R"(<https://h/p>; rel="prev", <https://h/n>; rel="next")"),
              "https://h/n");
    EXPECT_FALSE(next_page_link(""));
    EXPECT_FALSE(next_page_link(R"(<https://h/p>; rel="prev")"));
    EXPECT_FALSE(next_page_link("<unterminated; rel=\"next\""));
}

TEST(OllamaManifest, ModelLayerOnly) {
    const std::string good = R"({"schemaVersion": 2, "layers": [
        {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:)" +
                             std::string(64, '1') + R"(", "size": 5},
        {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" +
                             kSha + R"(", "size": 1234}]})";
    const auto layer = parse_ollama_manifest(good);
    EXPECT_EQ(layer.sha256, kSha);
    EXPECT_EQ(layer.size, 1234u);
    const auto manifest_with = [](const std::string& digest, const std::string& size) {
        return R"({"schemaVersion": 2, "layers": [{"mediaType": "application/vnd.ollama.image.model", "digest": ")" +
               digest + R"(", "size": )" + size + "}]}";
    };
    EXPECT_NE(format_error([&] {
                  parse_ollama_manifest(manifest_with("sha256:../../x", "1"));
              }).find("not sha256:"),
              std::string::npos);
    EXPECT_NE(format_error([&] {
                  parse_ollama_manifest(manifest_with("md5:" + kSha, "1"));
              }).find("not sha256:"),
              std::string::npos);
    EXPECT_NE(format_error([&] {
                  parse_ollama_manifest(manifest_with("sha256:" + kSha, "-4"));
              }).find("no usable size"),
              std::string::npos);
    EXPECT_NE(format_error([] {
                  parse_ollama_manifest(R"({"schemaVersion": 1, "layers": []})");
              }).find("schemaVersion 2"),
              std::string::npos);
    EXPECT_NE(format_error([] {
                  parse_ollama_manifest(R"({"schemaVersion": 2, "layers": []})");
              }).find("no layer of type"),
              std::string::npos);
}

TEST(Digest, KnownValues) {
    // sha256("abc") and git's id of a blob holding "hello\n" (git hash-object).
    Hasher sha(DigestKind::Sha256);
    sha.update(std::as_bytes(std::span(std::string_view("abc"))));
    EXPECT_EQ(sha.finish(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    Hasher git(DigestKind::GitSha1, 6);
    git.update(std::as_bytes(std::span(std::string_view("hello\n"))));
    EXPECT_EQ(git.finish(), "ce013625030ba8dba906f756967f9e9ca394464a");
}

class EnvironmentGuard {
  public:
    explicit EnvironmentGuard(std::initializer_list<std::pair<const char*, const char*>> vars) {
        for (const auto& [name, value] : vars) {
            const char* old = std::getenv(name);
            saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
            if (value)
                ::setenv(name, value, 1);
            else
                ::unsetenv(name);
        }
    }
    ~EnvironmentGuard() {
        for (const auto& [name, value] : saved_) {
            if (value)
                ::setenv(name.c_str(), value->c_str(), 1);
            else
                ::unsetenv(name.c_str());
        }
    }

  private:
    std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(Settings, DefaultsAndVariables) {
    {
        EnvironmentGuard env({{"HOME", "/home/u"},
                              {"XDG_CACHE_HOME", nullptr},
                              {"HF_HOME", nullptr},
                              {"HF_HUB_CACHE", nullptr},
                              {"MINFER_CACHE", nullptr},
                              {"HF_ENDPOINT", nullptr},
                              {"HF_TOKEN", nullptr},
                              {"HF_TOKEN_PATH", "/nonexistent/token"},
                              {"HF_HUB_OFFLINE", "yes"},
                              {"OLLAMA_MODELS", nullptr},
                              {"MINFER_OLLAMA_REGISTRY", nullptr}});
        const auto s = HubSettings::from_environment();
        EXPECT_EQ(s.hf_endpoint, "https://huggingface.co");
        EXPECT_EQ(s.hf_cache, "/home/u/.cache/huggingface/hub");
        EXPECT_EQ(s.minfer_cache, "/home/u/.cache/minfer");
        EXPECT_EQ(s.ollama_registry, "https://registry.ollama.ai");
        EXPECT_TRUE(s.offline);
        EXPECT_FALSE(s.hf_token);
        ASSERT_EQ(s.ollama_stores.size(), 2u);
        EXPECT_EQ(s.ollama_stores[0], "/home/u/.ollama/models");
        EXPECT_EQ(s.transfer.stall_seconds, 30);
    }
    {
        EnvironmentGuard env({{"HF_HOME", "/data/hf"},
                              {"HF_HUB_CACHE", nullptr},
                              {"HF_TOKEN", "  hf_abc  \n"},
                              {"HF_ENDPOINT", "http://127.0.0.1:9/"},
                              {"HF_HUB_OFFLINE", "0"},
                              {"MINFER_HUB_STALL_TIMEOUT", "0.5"}});
        const auto s = HubSettings::from_environment();
        EXPECT_EQ(s.hf_cache, "/data/hf/hub");
        EXPECT_EQ(s.hf_token, "hf_abc");
        EXPECT_EQ(s.hf_endpoint, "http://127.0.0.1:9");
        EXPECT_FALSE(s.offline);
        EXPECT_EQ(s.transfer.stall_seconds, 0.5);
    }
}

TEST(Settings, RefusesBadValuesWithoutQuotingTheToken) {
    const auto usage_error = [] {
        try {
            HubSettings::from_environment();
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("(accepted)");
    };
    {
        EnvironmentGuard env({{"HF_TOKEN", "hf_secret\r\nX-Evil: 1"}});
        const std::string e = usage_error();
        EXPECT_NE(e.find("cannot carry"), std::string::npos) << e;
        EXPECT_EQ(e.find("hf_secret"), std::string::npos) << e;
    }
    {
        EnvironmentGuard env({{"HF_TOKEN", nullptr}, {"HF_ENDPOINT", "file:///etc"}});
        EXPECT_NE(usage_error().find("HF_ENDPOINT"), std::string::npos);
    }
    {
        EnvironmentGuard env({{"HF_TOKEN", nullptr}, {"MINFER_OLLAMA_REGISTRY", "http://h/path"}});
        EXPECT_NE(usage_error().find("MINFER_OLLAMA_REGISTRY"), std::string::npos);
    }
    {
        EnvironmentGuard env({{"HF_TOKEN", nullptr}, {"MINFER_HUB_STALL_TIMEOUT", "soon"}});
        EXPECT_NE(usage_error().find("MINFER_HUB_STALL_TIMEOUT"), std::string::npos);
    }
    {
        EnvironmentGuard env({{"HF_TOKEN", nullptr}, {"MINFER_HUB_RETRIES", "-1"}});
        EXPECT_NE(usage_error().find("MINFER_HUB_RETRIES"), std::string::npos);
    }
}

}  // namespace
}  // namespace minfer::hub
