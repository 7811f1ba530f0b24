// `run` and `chat` with --grammar, --grammar-file, -j/--json-schema and --json-schema-file: the
// answer follows the grammar, bad grammars and schemas are usage errors named before the model
// is loaded, and the flags exclude each other.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "common/fixtures.h"
#include "common/process.h"

namespace minfer {
namespace {

using test::run_minfer;

std::filesystem::path temp_file(const std::string& name, const std::string& text) {
    const auto path = std::filesystem::temp_directory_path() / ("minfer-grammar-test-" + name);
    std::ofstream(path) << text;
    return path;
}

TEST(GrammarFlags, RunFollowsAGrammar) {
    MINFER_REQUIRE_FIXTURE(model, "models/stories260K.gguf");
    for (const char* seed : {"1", "2", "3"}) {
        const auto r = run_minfer({"run", model.string(), "--raw", "-p", "Once upon", "--seed",
                                   seed, "--temp", "1", "-n", "60", "--grammar",
                                   R"(root ::= " " [a-z]+ (" " [a-z]+){2,5} ".")"});
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_TRUE(std::regex_match(r.out, std::regex(R"( [a-z]+( [a-z]+){2,5}\.\n)"))) << r.out;
        EXPECT_NE(r.err.find("stopped by  end of generation"), std::string::npos) << r.err;
    }
}

TEST(GrammarFlags, RunFollowsAJsonSchemaFromAFile) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    const auto schema = temp_file("schema.json", R"({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10}, "n": {"type": "integer", "minimum": 1,
        "maximum": 9}}, "required": ["name", "n"], "additionalProperties": false})");
    const auto r = run_minfer({"run", model.string(), "-p", "A person", "--seed", "7", "-n", "200",
                               "--json-schema-file", schema.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto doc = nlohmann::json::parse(r.out);
    EXPECT_EQ(doc["stop_reason"], "eog");
    const auto answer = nlohmann::json::parse(doc["text"].get<std::string>());
    EXPECT_TRUE(answer["name"].is_string());
    EXPECT_GE(answer["n"].get<int>(), 1);
    EXPECT_LE(answer["n"].get<int>(), 9);
    EXPECT_EQ(answer.size(), 2u);
}

TEST(GrammarFlags, ChatAnswersFollowTheSchema) {
    MINFER_REQUIRE_FIXTURE(model, "models/tiny-qwen2-q8_0.gguf");
    test::ProcessOptions options;
    options.stdin_text = "first\nsecond\n";
    const auto r = test::run_minfer_process(
        {"chat", model.string(), "--seed", "3", "-n", "200", "-j",
         R"({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 3})"},
        options);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Each answer is a JSON array (whitespace inside may hold line breaks).
    int answers = 0;
    for (std::size_t at = r.out.find('['); at != std::string::npos; ++answers) {
        const std::size_t end = r.out.find(']', at);
        ASSERT_NE(end, std::string::npos) << r.out;
        const auto v = nlohmann::json::parse(r.out.substr(at, end + 1 - at));
        EXPECT_GE(v.size(), 1u);
        for (const auto& x : v) EXPECT_TRUE(x.is_boolean()) << r.out;
        at = r.out.find('[', end);
    }
    EXPECT_EQ(answers, 2) << r.out;
}

TEST(GrammarFlags, BadGrammarsAndSchemasAreUsageErrorsBeforeLoading) {
    const std::string missing_model = "/nonexistent/model.gguf";  // never opened: checked first
    struct Case {
        std::vector<std::string> flags;
        std::string message;
        int exit_code = 2;
    };
    const auto dir = std::filesystem::temp_directory_path();
    const std::vector<Case> cases = {
        {{"--grammar", "root ::= (\"a\""},
         "minfer: error: grammar: line 1, column 10: this '(' is never closed"},
        {{"--grammar", "item ::= \"a\""}, "the grammar has no 'root' rule"},
        {{"--grammar", "root ::= root \"x\" | \"y\""}, "the rule 'root' is left-recursive"},
        {{"--grammar", "root ::= \"a\" root"}, "the rule 'root' can never finish"},
        {{"-j", R"({"type": "string", "format": "email"})"},
         "json schema: the format 'email' is not supported"},
        {{"-j", "{not json"}, "json schema: not valid JSON"},
        {{"--json-schema-file", dir.string()}, "it is a directory, expected a file", 1},
        {{"--grammar", "root ::= \"a\"", "-j", "{}"}, "excludes"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> args = {"run", missing_model, "-p", "x"};
        args.insert(args.end(), c.flags.begin(), c.flags.end());
        const auto r = run_minfer(args);
        EXPECT_EQ(r.exit_code, c.exit_code) << c.message << "\n" << r.err;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    }
}

}  // namespace
}  // namespace minfer
