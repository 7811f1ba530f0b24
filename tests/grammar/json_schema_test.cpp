// JSON Schema -> grammar: a table of schemas with texts that must and must not match, the
// keywords refused with their messages, and hostile schemas that end in an error or a grammar
// within limits.

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex_pattern.h"

namespace minfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

// A vocabulary of the 256 single bytes: matching a text is matching its bytes.
std::shared_ptr<const GrammarVocabulary> byte_vocabulary() {
    static const auto v = [] {
        std::vector<std::string> pieces;
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
        pieces.emplace_back();  // EOG
        return std::make_shared<GrammarVocabulary>(std::move(pieces), std::vector<int32_t>{256},
                                                   std::unordered_map<std::string, int32_t>{});
    }();
    return v;
}

bool matches(const std::string& gbnf, const std::string& text) {
    GrammarMatcher m(CompiledGrammar::compile(parse_gbnf(gbnf), byte_vocabulary()));
    return m.accept_bytes(text) && m.is_complete();
}

struct Case {
    const char* schema;
    std::vector<const char*> good;
    std::vector<const char*> bad;
};

const Case kCases[] = {
    {R"({"type": "string"})",
     {R"("")", R"("hello")", R"("a\"b\\c\n\u00e9")", "\"日本\""},
     {R"(hello)", R"("a)", "\"a\nb\"", R"("\x")", "1"}},
    {R"({"type": "integer"})",
     {"0", "-7", "42", "1234567890123456"},
     {"01", "1.5", "-", "12345678901234567", R"("1")"}},
    {R"({"type": "number"})", {"0", "-0.5", "3.25e+10", "1E-3", "7"}, {".5", "1.", "1e", "--1"}},
    {R"({"type": "boolean"})", {"true", "false"}, {"True", "1", "null"}},
    {R"({"type": "null"})", {"null"}, {"nul", "none"}},
    {R"({"type": ["string", "null"]})", {"null", R"("x")"}, {"1"}},
    {R"({"enum": ["red", "green", 3, null, {"a": [1]}]})",
     {R"("red")", R"("green")", "3", "null", R"({"a":[1]})"},
     {R"("blue")", "4", R"({"a": [1]})"}},
    {R"({"type": "string", "enum": ["a", 1, "b"]})", {R"("a")", R"("b")"}, {"1"}},
    {R"({"const": {"k": "v"}})", {R"({"k":"v"})"}, {R"({"k":"w"})"}},
    {R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
         "required": ["name"]})",
     {R"({"name": "Ann"})", R"({"name": "Ann", "age": 31})", R"({ "name":"Ann","age":31 })",
      "{\n  \"name\": \"Ann\"\n}"},
     {R"({})", R"({"age": 31})", R"({"age": 31, "name": "Ann"})", R"({"name": "Ann", "x": 1})",
      R"({"name": "Ann",})"}},
    {R"({"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}})",
     {"{}", R"({"a": 1})", R"({"b": 2})", R"({"a": 1, "c": 3})", R"({"a": 1, "b": 2, "c": 3})"},
     {R"({"b": 2, "a": 1})", R"({, "b": 2})", R"({"a": 1 "b": 2})"}},
    {R"({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
         "additionalProperties": {"type": "string"}})",
     {R"({"id": 1})", R"({"id": 1, "note": "x"})", R"({"id": 1, "i": "x", "idx": "y"})"},
     {R"({"id": 1, "id": "x"})", R"({"id": 1, "note": 2})"}},
    {R"({"type": "object", "additionalProperties": true})",
     {"{}", R"({"x": [1, {"y": null}]})"},
     {"[]"}},
    {R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
     {"[1, 2]", "[1,2,3]"},
     {"[]", "[1]", "[1, 2, 3, 4]", R"([1, "2"])"}},
    {R"({"type": "array", "items": {"type": "boolean"}})",
     {"[]", "[true]", "[true, false, true]"},
     {"[true,]", "[,true]"}},
    {R"({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
     {"[]", R"(["a"])", R"(["a", 1])"},
     {R"(["a", 1, 2])", "[1]"}},
    {R"({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"},
         "minItems": 2})",
     {R"(["a", null])", R"(["a", null, null])"},
     {R"(["a"])", R"([null, null])"}},
    {R"({"type": "string", "minLength": 2, "maxLength": 3})",
     {R"("ab")", R"("abc")", R"("a\"")"},
     {R"("a")", R"("abcd")"}},
    {R"({"type": "string", "pattern": "^[a-z]+-\\d{2}$"})",
     {R"("abc-12")"},
     {R"("abc-1")", R"("Abc-12")", R"("abc-123")"}},
    {R"({"type": "string", "pattern": "ab"})",
     {R"("ab")", R"("xaby")", R"("x\"ab")"},
     {R"("a")", R"("ba")"}},
    {R"({"type": "string", "pattern": "^a\"b$"})", {R"("a\"b")"}, {R"("a"b")"}},
    {R"({"type": "string", "format": "date"})",
     {R"("2024-02-28")", R"("1999-12-31")"},
     {R"("2024-02-30")", R"("2024-13-01")", R"("24-01-01")"}},
    {R"({"type": "string", "format": "time"})",
     {R"("23:59:59Z")", R"("08:00:00.123+02:00")"},
     {R"("24:00:00Z")", R"("08:00:00")"}},
    {R"({"type": "string", "format": "date-time"})",
     {R"("2024-07-26T10:30:00Z")"},
     {R"("2024-07-26 10:30:00Z")"}},
    {R"({"type": "string", "format": "uuid"})",
     {R"("123e4567-e89b-12d3-a456-426614174000")"},
     {R"("123e4567e89b12d3a456426614174000")"}},
    {R"({"type": "integer", "minimum": -5, "maximum": 120})",
     {"-5", "-1", "0", "9", "10", "99", "100", "120"},
     {"-6", "121", "200", "-0", "007"}},
    {R"({"type": "integer", "exclusiveMinimum": 10, "exclusiveMaximum": 1000})",
     {"11", "999", "500"},
     {"10", "1000", "5"}},
    {R"({"type": "integer", "minimum": 1000})",
     {"1000", "99999", "1234567890123456"},
     {"999", "-1000"}},
    {R"({"type": "integer", "maximum": -20})", {"-20", "-1000"}, {"-19", "0", "5"}},
    {R"({"type": "number", "minimum": 0.5, "maximum": 3})",
     {"1", "2.75", "3", "3.0"},
     {"0", "4", "3.5", "0.4"}},
    {R"({"type": "number", "minimum": 0, "maximum": 1})",
     {"0", "0.25", "1", "1.0", "0.999"},
     {"1.5", "-0.1", "2", "1.01"}},
    {R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})",
     {"0.5", "1", "0.001"},
     {"0", "0.0", "1.5"}},
    {R"({"type": "number", "minimum": -1, "maximum": 1})",
     {"-1", "-0.5", "0", "1", "-1.0"},
     {"-1.5", "1.1", "-1.01"}},
    {R"({"type": "number", "exclusiveMaximum": -2})",
     {"-3", "-2.5", "-1000.25"},
     {"-2", "-1.9", "0", "-2.0"}},
    {R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})",
     {"5", R"("x")"},
     {R"("xy")", "true"}},
    {R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "string"}}}]})",
     {R"({"a": 1})", R"({"a": 1, "b": "x"})"},
     {R"({"b": "x"})"}},
    {R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
         "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
        "$ref": "#/$defs/node"})",
     {R"({"v": 1, "next": null})", R"({"v": 1, "next": {"v": 2, "next": null}})"},
     {R"({"v": 1})", R"({"v": 1, "next": {"v": 2}})"}},
    {R"({"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b"]},
         "maxItems": 2}, "meta": {"type": "object", "properties": {"ok": {"type": "boolean"}},
         "required": ["ok"]}}, "required": ["tags", "meta"], "title": "T", "description": "d"})",
     {R"({"tags": ["a"], "meta": {"ok": true}})", R"({"tags": [], "meta": {"ok": false}})"},
     {R"({"tags": ["c"], "meta": {"ok": true}})", R"({"tags": ["a"], "meta": {}})"}},
    {R"(true)", {"1", R"({"a": [null]})"}, {"nul"}},
    {R"({})", {"[1]", R"("s")"}, {"[1,]"}},
};

TEST(JsonSchema, TableOfSchemas) {
    for (const Case& c : kCases) {
        SCOPED_TRACE(c.schema);
        const std::string gbnf = json_schema_to_gbnf(Json::parse(c.schema));
        for (const char* text : c.good) EXPECT_TRUE(matches(gbnf, text)) << text << "\n" << gbnf;
        for (const char* text : c.bad) EXPECT_FALSE(matches(gbnf, text)) << text << "\n" << gbnf;
    }
}

std::string error_of(const std::string& schema) {
    try {
        const std::string gbnf = json_schema_to_gbnf(Json::parse(schema));
        CompiledGrammar::compile(parse_gbnf(gbnf), byte_vocabulary());
    } catch (const UsageError& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(JsonSchema, RefusesWhatItCannotHonour) {
    EXPECT_EQ(error_of(R"({"type": "integer", "multipleOf": 3})"),
              "json schema: unsupported keyword 'multipleOf' at #");
    EXPECT_EQ(error_of(R"({"properties": {"a b": {"type": "string", "uniqueItems": true}}})"),
              "json schema: unsupported keyword 'uniqueItems' at #/properties/a b");
    EXPECT_EQ(error_of(R"({"type": "string", "format": "email"})"),
              "json schema: the format 'email' is not supported (date, time, date-time, uuid are) "
              "at #");
    EXPECT_EQ(error_of(R"({"type": "strnig"})"), "json schema: unknown type 'strnig' at #");
    EXPECT_EQ(error_of(R"({"$ref": "https://example.com/s.json"})"),
              "json schema: the $ref 'https://example.com/s.json' is not local (only '#...' "
              "references are) at #");
    EXPECT_EQ(error_of(R"({"$ref": "#/$defs/missing"})"),
              "json schema: the $ref '#/$defs/missing' points at nothing at #");
    EXPECT_EQ(
        error_of(R"({"type": "string", "pattern": "(a)\\1"})"),
        "json schema: pattern: backreferences are not supported at offset 5 of '(a)\\1' at #");
    EXPECT_EQ(error_of(R"({"type": "integer", "minimum": 5, "maximum": 4})"),
              "json schema: no integer lies within 'minimum' and 'maximum' at #");
    EXPECT_EQ(error_of(R"({"type": "array", "minItems": 3, "maxItems": 1})"),
              "json schema: 'maxItems' is below 'minItems' (or the number of 'prefixItems') at #");
    EXPECT_EQ(error_of(R"(false)"), "json schema: the schema 'false' allows no value at #");
    EXPECT_EQ(error_of(R"({"enum": []})"), "json schema: 'enum' must be a non-empty array at #");
    EXPECT_EQ(error_of(R"({"type": "object", "required": ["x"]})"),
              "json schema: the required property 'x' is not among 'properties' at #");
    EXPECT_EQ(error_of(R"({"minLength": -1})"),
              "json schema: 'minLength' must be a non-negative integer, got -1 at #");
}

TEST(JsonSchema, HostileSchemasEndInAnErrorOrABoundedGrammar) {
    // 10,000-deep nesting.
    std::string deep;
    for (int i = 0; i < 10000; ++i) deep += R"({"type": "array", "items": )";
    deep += "{}";
    for (int i = 0; i < 10000; ++i) deep += "}";
    // (The text as is: a parse and dump round trip would recurse 10,000 deep in nlohmann's
    // serializer, beyond the stack under AddressSanitizer.)
    EXPECT_NE(error_of(deep).find("nests deeper than 128 levels"), std::string::npos);
    // A huge enum.
    Json big = {{"enum", Json::array()}};
    for (int i = 0; i < 20000; ++i) big["enum"].push_back(i);
    EXPECT_NE(error_of(big.dump()).find("more than the 10000 allowed"), std::string::npos);
    // Self-reference without a base case: no text can finish.
    EXPECT_NE(error_of(R"({"$ref": "#"})").find("can never finish"), std::string::npos);
    EXPECT_NE(
        error_of(R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})")
            .find("can never finish"),
        std::string::npos);
    // With a base case it is fine.
    EXPECT_EQ(error_of(R"({"type": "array", "items": {"$ref": "#"}})"), "(no error)");
    // Catastrophic regular expressions cost a grammar nothing.
    EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^(a+)+$"})"), "(no error)");
    EXPECT_EQ(error_of(R"({"type": "string", "pattern": "^(a*)*b(x|x|x)*$"})"), "(no error)");
}

TEST(RegexPattern, Constructs) {
    const auto matches_pattern = [](const char* pattern, const char* text) {
        const std::string gbnf = "root ::= " + expr_to_gbnf(regex_to_expr(pattern, false)) + "\n";
        return matches(gbnf, text);
    };
    EXPECT_TRUE(matches_pattern("^\\d{3}-\\w+\\s?$", "123-ab_c "));
    EXPECT_FALSE(matches_pattern("^\\d{3}$", "12a"));
    EXPECT_TRUE(matches_pattern("^[^abc]\\.(x|yz)*?$", "d.xyzx"));
    EXPECT_FALSE(matches_pattern("^.$", "\n"));
    EXPECT_TRUE(matches_pattern("^(?:ab|cd){2}(?<n>e)?\\u00e9\\x41$", "abcdeéA"));
    EXPECT_TRUE(matches_pattern("^[\\d-]+$", "1-2"));
    EXPECT_TRUE(matches_pattern("x", "aaxbb"));  // a search, not a full match
}

TEST(RegexPattern, Errors) {
    const auto error = [](const char* pattern) {
        try {
            regex_to_expr(pattern, false);
        } catch (const UsageError& e) {
            return std::string(e.what());
        }
        return std::string("(no error)");
    };
    EXPECT_EQ(error("a(?=b)"),
              "pattern: lookaround assertions are not supported at offset 2 of 'a(?=b)'");
    EXPECT_EQ(error("\\bword"),
              "pattern: word boundaries (\\b) are not supported at offset 2 of '\\bword'");
    EXPECT_EQ(error("a)"), "pattern: an unmatched ')' at offset 1 of 'a)'");
    EXPECT_EQ(error("(a"), "pattern: a '(' that is never closed at offset 2 of '(a'");
    EXPECT_EQ(error("*a"), "pattern: '*' has nothing to repeat at offset 0 of '*a'");
    EXPECT_EQ(error("a^b"),
              "pattern: '^' and '$' are supported only at the start and end of the whole pattern "
              "at offset 1 of 'a^b'");
    EXPECT_EQ(error("[z-a]"),
              "pattern: a range that ends below where it starts at offset 4 of '[z-a]'");
    EXPECT_EQ(
        error("\\p{L}"),
        "pattern: Unicode property escapes (\\p{...}) are not supported at offset 2 of '\\p{L}'");
}

}  // namespace
}  // namespace minfer::grammar

namespace minfer::grammar {
namespace {

// Findings of a review, each a schema that crashed, hung, misled or ignored a keyword.
TEST(JsonSchema, ReviewedHostileSchemas) {
    // allOf through $ref: a cycle is refused, a target referred to many times is merged once.
    EXPECT_EQ(error_of(R"({"allOf": [{"$ref": "#"}]})"),
              "json schema: 'allOf' refers back to itself through '#' at #");
    Json doubling = {
        {"$defs", {{"d0", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}}}};
    for (int k = 1; k <= 40; ++k) {
        const std::string previous = "#/$defs/d" + std::to_string(k - 1);
        doubling["$defs"]["d" + std::to_string(k)] = {
            {"allOf", Json::array({{{"$ref", previous}}, {{"$ref", previous}}})}};
    }
    doubling["$ref"] = "#/$defs/d40";
    EXPECT_EQ(error_of(doubling.dump()), "(no error)");
    EXPECT_EQ(error_of(R"({"allOf": [{"$ref": 5}]})"), "json schema: '$ref' must be a string at #");
    // Keywords beside enum and const are refused, not ignored; const and enum respect 'type'.
    EXPECT_EQ(error_of(R"({"type": "string", "enum": ["a", "bbbb"], "maxLength": 2})"),
              "json schema: 'maxLength' beside 'enum' is not supported (only 'type' is) at #");
    EXPECT_EQ(error_of(R"({"type": "integer", "const": "x"})"),
              "json schema: no value of 'enum' or 'const' has the schema's 'type' at #");
    // Many optional prefixItems are rules, not nested groups.
    Json tuple = {{"type", "array"}, {"prefixItems", Json::array()}};
    for (int i = 0; i < 400; ++i) tuple["prefixItems"].push_back({{"type", "boolean"}});
    EXPECT_EQ(error_of(tuple.dump()), "(no error)");
    const std::string gbnf = json_schema_to_gbnf(tuple);
    EXPECT_TRUE(matches(gbnf, "[true,false]"));
    EXPECT_FALSE(matches(gbnf, "[true,]"));
    // A \u escape of a surrogate (half a character) is not generated.
    const std::string strings = json_schema_to_gbnf(Json::parse(R"({"type": "string"})"));
    EXPECT_FALSE(matches(strings, R"("\uD83D\uDE00")"));
    EXPECT_TRUE(matches(strings, R"("\u00e9😀")"));
}

}  // namespace
}  // namespace minfer::grammar
