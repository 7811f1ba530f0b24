// Model references: every form parsed, every unsafe piece refused with a message naming it.

#include <gtest/gtest.h>

#include "core/error.h"
#include "hub/model_selection.h"
#include "hub/reference.h"
#include "hub/url.h"

namespace minfer::hub {
namespace {

HfReference hf(std::string_view text) {
    return std::get<HfReference>(parse_reference(text));
}

std::string usage_error(std::string_view text) {
    try {
        parse_reference(text);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(accepted)";
}

TEST(Reference, HfForms) {
    auto r = hf("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF");
    EXPECT_EQ(r.repo, "Qwen/Qwen2.5-0.5B-Instruct-GGUF");
    EXPECT_EQ(r.revision, "main");
    EXPECT_FALSE(r.revision_given);
    EXPECT_EQ(r.quant, "");
    EXPECT_EQ(r.file, "");

    r = hf("hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M");
    EXPECT_EQ(r.quant, "Q4_K_M");

    r = hf("hf:o/r/sub/dir/model-Q8_0.gguf");
    EXPECT_EQ(r.repo, "o/r");
    EXPECT_EQ(r.file, "sub/dir/model-Q8_0.gguf");

    r = hf("hf:o/r@v1.2:q4_k_m");
    EXPECT_EQ(r.revision, "v1.2");
    EXPECT_TRUE(r.revision_given);
    EXPECT_EQ(r.quant, "q4_k_m");

    r = hf("hf:o/r@0123456789abcdef0123456789abcdef01234567/m.gguf");
    EXPECT_EQ(r.revision, "0123456789abcdef0123456789abcdef01234567");
    EXPECT_EQ(r.file, "m.gguf");

    r = hf("hf:o/r@refs/pr/12/dir/m.gguf");
    EXPECT_EQ(r.revision, "refs/pr/12");
    EXPECT_EQ(r.file, "dir/m.gguf");

    r = hf("hf:o/r@refs/pr/3:Q8_0");
    EXPECT_EQ(r.revision, "refs/pr/3");
    EXPECT_EQ(r.quant, "Q8_0");

    r = hf("hf:o/r@feature%2Fx:Q8_0");
    EXPECT_EQ(r.revision, "feature/x");

    r = hf("hf:o/r@main/m.GGUF");
    EXPECT_EQ(r.revision, "main");
    EXPECT_EQ(r.file, "m.GGUF");
}

TEST(Reference, CanonicalSpellingRoundTrips) {
    for (const char* text :
         {"hf:o/r", "hf:o/r:Q4_K_M", "hf:o/r/a/b.gguf", "hf:o/r@v1:Q8_0", "hf:o/r@refs/pr/1/m.gguf",
          "hf:o/r@feature%2Fx:Q8_0", "ollama:qwen2.5", "ollama:qwen2.5:0.5b", "ollama:user/m:tag",
          "https://example.com/models/m.gguf"}) {
        EXPECT_EQ(to_string(parse_reference(text)), text);
        EXPECT_EQ(to_string(parse_reference(to_string(parse_reference(text)))), text);
    }
    // Defaults are left out.
    EXPECT_EQ(to_string(parse_reference("ollama:library/qwen2.5:latest")), "ollama:qwen2.5");
}

TEST(Reference, OllamaForms) {
    auto o = std::get<OllamaReference>(parse_reference("ollama:llama3.2"));
    EXPECT_EQ(o.namespace_name, "library");
    EXPECT_EQ(o.name, "llama3.2");
    EXPECT_EQ(o.tag, "latest");
    o = std::get<OllamaReference>(parse_reference("ollama:someone/model-x:q4_K_M"));
    EXPECT_EQ(o.namespace_name, "someone");
    EXPECT_EQ(o.name, "model-x");
    EXPECT_EQ(o.tag, "q4_K_M");
}

TEST(Reference, UrlsAndPaths) {
    auto u = std::get<UrlReference>(parse_reference("https://h.example/dir/a%20b.gguf?download=1"));
    EXPECT_EQ(u.file_name, "a b.gguf");
    EXPECT_TRUE(std::holds_alternative<PathReference>(parse_reference("models/x.gguf")));
    EXPECT_TRUE(std::holds_alternative<PathReference>(parse_reference("./hf:odd-name.gguf")));
    EXPECT_TRUE(looks_remote("hf:x"));
    EXPECT_TRUE(looks_remote("ollama:x"));
    EXPECT_TRUE(looks_remote("http://x/y.gguf"));
    EXPECT_FALSE(looks_remote("x.gguf"));
}

TEST(Reference, RefusesUnsafeOrMalformedPieces) {
    struct Case {
        const char* text;
        const char* message_part;
    };
    for (const Case& c : std::initializer_list<Case>{
             {"hf:", "expected hf:OWNER/REPO"},
             {"hf:onlyowner", "expected hf:OWNER/REPO"},
             {"hf://o/r", "without '//'"},
             {"hf:../r", "not a repository name"},
             {"hf:o/..", "not a repository name"},
             {"hf:o--x/r", "not a repository name"},
             {"hf:o/r@", "not a revision"},
             {"hf:o/r@../../x:Q4", "not a revision"},
             {"hf:o/r@a%2F..%2Fb:Q4", "not a revision"},
             {"hf:o/r@x%00y:Q4", "not a revision"},
             {"hf:o/r@refs/pr/x/m.gguf", "not a revision"},
             {"hf:o/r:", "not a quantization tag"},
             {"hf:o/r:Q4/../x", "not a quantization tag"},
             {"hf:o/r/../x.gguf", "not a file path"},
             {"hf:o/r//etc/x.gguf", "not a file path"},
             {"hf:o/r/a\\b.gguf", "not a file path"},
             {"hf:o/r/a\x1b[31m.gguf", "not a file path"},
             {"hf:o/r/readme.md", "not a .gguf file"},
             {"hf:o/r?x", "not a repository name"},
             {"ollama:", "is not a model name"},
             {"ollama:../x", "is not a user name"},
             {"ollama:a/b/c", "is not a model name"},
             {"ollama:x:", "is not a tag"},
             {"ollama:x:../../t", "is not a tag"},
             {"https://h/x.bin", "must end in a file name"},
             {"https://h/dir/..%2F..%2Fx.gguf", "must end in a file name"},
             {"https://user:pw@h/x.gguf", "not a usable"},
             {"http://h/x y.gguf", "not a usable"},
             {"", "empty"},
         }) {
        EXPECT_NE(usage_error(c.text).find(c.message_part), std::string::npos)
            << c.text << " -> " << usage_error(c.text);
    }
}

TEST(SafePath, Rules) {
    EXPECT_TRUE(is_safe_relative_path("a.gguf"));
    EXPECT_TRUE(is_safe_relative_path("dir/sub/a-00001-of-00002.gguf"));
    EXPECT_TRUE(is_safe_relative_path("ünïcode/模型.gguf"));
    for (const char* bad : {"", "/abs.gguf", "../x", "a/../b", "a/./b", ".", "a//b", "a/", "a\\b",
                            "a\nb", "a\x7f", "a\xc2\x9b[31m", "\xff.gguf"})
        EXPECT_FALSE(is_safe_relative_path(bad)) << bad;
    EXPECT_FALSE(is_safe_relative_path(std::string(300, 'a')));
    EXPECT_FALSE(is_safe_relative_path(std::string(1025, 'a')));
}

TEST(QuantTag, WholeWordsOnly) {
    EXPECT_TRUE(has_quant_tag("model-Q4_K_M.gguf", "q4_k_m"));
    EXPECT_TRUE(has_quant_tag("llama-2-7b.Q4_K_M.gguf", "Q4_K_M"));
    EXPECT_TRUE(has_quant_tag("Q4_K_M/model-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"));
    EXPECT_TRUE(has_quant_tag("model_Q8_0.gguf", "Q8_0"));
    EXPECT_FALSE(has_quant_tag("model-Q4_K_M.gguf", "Q4_K"));
    EXPECT_FALSE(has_quant_tag("model-IQ4_0.gguf", "Q4_0"));
    EXPECT_FALSE(has_quant_tag("model-Q4_0_4_4.gguf", "Q4_0"));
    EXPECT_EQ(quant_tag_of("qwen2.5-0.5b-instruct-q4_k_m.gguf"), "Q4_K_M");
    EXPECT_EQ(quant_tag_of("Llama-3.2-1B-Instruct-IQ4_XS.gguf"), "IQ4_XS");
    EXPECT_EQ(quant_tag_of("model-f16.gguf"), "F16");
    EXPECT_EQ(quant_tag_of("Qwen3-8B-BF16-00001-of-00002.gguf"), "BF16");
    EXPECT_EQ(quant_tag_of("sha256-0123"), "");
    EXPECT_EQ(quant_tag_of("model.gguf"), "");
}

template <class E>
std::string selection_error(const std::vector<std::string>& paths, std::string_view quant,
                            std::string_view file) {
    try {
        select_model_files(paths, quant, file, "hf:o/r");
    } catch (const E& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(ModelSelection, PicksByRule) {
    const std::vector<std::string> repo = {
        "README.md",
        "model-Q8_0.gguf",
        "model-Q4_K_M.gguf",
        "model-Q4_K_S.gguf",
        "mmproj-model-f16.gguf",
        "imatrix.gguf",
        "big/model-F16-00002-of-00002.gguf",
        "big/model-F16-00001-of-00002.gguf",
    };
    using V = std::vector<std::string>;
    EXPECT_EQ(select_model_files(repo, "", "", "r"), V{"model-Q4_K_M.gguf"});
    EXPECT_EQ(select_model_files(repo, "q8_0", "", "r"), V{"model-Q8_0.gguf"});
    EXPECT_EQ(select_model_files(repo, "F16", "", "r"),
              (V{"big/model-F16-00001-of-00002.gguf", "big/model-F16-00002-of-00002.gguf"}));
    EXPECT_EQ(select_model_files(repo, "", "big/model-F16-00002-of-00002.gguf", "r"),
              (V{"big/model-F16-00001-of-00002.gguf", "big/model-F16-00002-of-00002.gguf"}));
    EXPECT_EQ(select_model_files(repo, "", "mmproj-model-f16.gguf", "r"),
              V{"mmproj-model-f16.gguf"});  // named explicitly: allowed
    // One model and a projector: the model, never the projector.
    EXPECT_EQ(select_model_files({"mmproj-x-f16.gguf", "x-Q8_0.gguf"}, "", "", "r"),
              V{"x-Q8_0.gguf"});

    EXPECT_NE(selection_error<IoError>(repo, "Q4_K", "").find("no model file tagged Q4_K"),
              std::string::npos);
    EXPECT_NE(selection_error<IoError>(repo, "Q4_K", "").find("model-Q4_K_M.gguf"),
              std::string::npos);
    EXPECT_NE(selection_error<IoError>(repo, "", "nope.gguf").find("no file 'nope.gguf'"),
              std::string::npos);
    EXPECT_NE(selection_error<IoError>({"README.md"}, "", "").find("no GGUF model file"),
              std::string::npos);
    const std::string several = selection_error<UsageError>({"a-Q8_0.gguf", "b-Q8_0.gguf"}, "", "");
    EXPECT_NE(several.find("none is Q4_K_M"), std::string::npos) << several;
    EXPECT_NE(several.find("a-Q8_0.gguf, b-Q8_0.gguf"), std::string::npos) << several;
    const std::string same_tag =
        selection_error<UsageError>({"a-Q8_0.gguf", "b-Q8_0.gguf"}, "Q8_0", "");
    EXPECT_NE(same_tag.find("2 models are tagged Q8_0"), std::string::npos) << same_tag;
    const std::string incomplete = selection_error<IoError>(
        {"m-Q8_0-00001-of-00003.gguf", "m-Q8_0-00003-of-00003.gguf"}, "Q8_0", "");
    EXPECT_NE(incomplete.find("part 2 of 3 is missing"), std::string::npos) << incomplete;
}

TEST(Url, ParsingEncodingRedirects) {
    const auto u = parse_http_url("https://Example.COM:8443/a/b?c=d#e");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->host, "example.com");
    EXPECT_EQ(u->port, 8443);
    EXPECT_EQ(u->path, "/a/b");
    EXPECT_EQ(u->origin(), "https://example.com:8443");
    EXPECT_EQ(parse_http_url("http://h/")->origin(), "http://h:80");
    EXPECT_EQ(parse_http_url("http://h:80/")->authority(), "h");
    EXPECT_FALSE(parse_http_url("ftp://h/x"));
    EXPECT_FALSE(parse_http_url("http://u:p@h/x"));
    EXPECT_FALSE(parse_http_url("http://h/x\r\nInjected: 1"));
    EXPECT_FALSE(parse_http_url("/relative"));

    EXPECT_EQ(percent_encode("refs/pr/1", false), "refs%2Fpr%2F1");
    EXPECT_EQ(percent_encode("dir/a b+c.gguf", true), "dir/a%20b%2Bc.gguf");
    EXPECT_EQ(percent_decode("a%2Fb%41"), "a/bA");
    EXPECT_FALSE(percent_decode("a%2"));
    EXPECT_FALSE(percent_decode("a%zz"));
    EXPECT_FALSE(percent_decode("a%00"));

    EXPECT_EQ(resolve_redirect("https://hub.example/o/r/resolve/c/f", "https://cdn.example/x?s=1"),
              "https://cdn.example/x?s=1");
    EXPECT_EQ(resolve_redirect("http://h:1/a/b", "/c/d"), "http://h:1/c/d");
    EXPECT_EQ(resolve_redirect("http://h:1/a/b", "e"), "http://h:1/a/e");
    EXPECT_THROW(resolve_redirect("https://h/a", "http://h/b"), FormatError);
    EXPECT_THROW(resolve_redirect("https://h/a", "file:///etc/passwd"), FormatError);
    EXPECT_THROW(resolve_redirect("https://h/a", ""), FormatError);
    EXPECT_THROW(resolve_redirect("https://h/a", "http://x/\r\nSet-Cookie: a"), FormatError);
}

}  // namespace
}  // namespace minfer::hub
