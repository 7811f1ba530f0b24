// Unit tests of the engine's pieces: lexer tokens, error positions, limits against hostile
// templates, Python printing of values, JSON dumping and Unicode helpers.

#include <gtest/gtest.h>

#include <string>

#include "jinja/jinja_lexer.h"
#include "jinja/jinja_template.h"
#include "jinja/py_format.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {
namespace {

std::string render(const std::string& source, const RenderLimits& limits = {}) {
    RenderOptions options;
    options.limits = limits;
    return Template::parse(source).render(Dict{}, options);
}

// The message of the error `f` throws (as type E), or "" when it does not throw.
template <class E, class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "";
}

std::string parse_error(const std::string& source) {
    return error_of<FormatError>([&] { Template::parse(source); });
}

std::string render_error(const std::string& source, const RenderLimits& limits = {}) {
    return error_of<TemplateError>([&] { render(source, limits); });
}

TEST(JinjaLexer, SplitsTextTagsAndOperators) {
    const auto tokens = tokenize("a {{ x|f(1, 'b') }} c");
    std::vector<std::pair<TokenType, std::string>> got;
    for (const auto& t : tokens) got.emplace_back(t.type, t.value);
    const std::vector<std::pair<TokenType, std::string>> want = {
        {TokenType::Text, "a "},    {TokenType::VariableBegin, ""}, {TokenType::Name, "x"},
        {TokenType::Operator, "|"}, {TokenType::Name, "f"},         {TokenType::Operator, "("},
        {TokenType::Integer, "1"},  {TokenType::Operator, ","},     {TokenType::String, "b"},
        {TokenType::Operator, ")"}, {TokenType::VariableEnd, ""},   {TokenType::Text, " c"},
        {TokenType::End, ""}};
    EXPECT_EQ(got, want);
}

TEST(JinjaLexer, TracksLinesAndColumns) {
    const auto tokens = tokenize("ab\n  {{ x }}");
    ASSERT_GE(tokens.size(), 3u);
    EXPECT_EQ(tokens[1].type, TokenType::VariableBegin);
    EXPECT_EQ(tokens[1].pos.line, 2);
    EXPECT_EQ(tokens[1].pos.column, 3);
    EXPECT_EQ(tokens[2].pos.column, 6);
}

TEST(JinjaLexer, DecodesStringEscapesAndNumbers) {
    const auto tokens = tokenize(R"({{ '\n\t\x41\u00e9\U0001F999\q' 1_000 0x1f 2.5e3 }})");
    EXPECT_EQ(tokens[1].value, "\n\tA\xC3\xA9\xF0\x9F\xA6\x99\\q");
    EXPECT_EQ(tokens[2].type, TokenType::Integer);
    EXPECT_EQ(tokens[2].value, "1000");
    EXPECT_EQ(tokens[3].value, "0x1f");
    EXPECT_EQ(tokens[4].type, TokenType::Float);
}

TEST(JinjaLexer, NormalisesNewlinesAndDropsOneTrailingNewline) {
    EXPECT_EQ(render("a\r\nb\rc\n\n"), "a\nb\nc\n");
}

TEST(JinjaStatements, HuggingFaceGenerationBlockRendersItsBody) {
    EXPECT_EQ(render("a{% generation %}{% set x = 1 %}b{{ x }}{% endgeneration %}{{ x }}c"),
              "ab1c");
}

TEST(JinjaErrors, SyntaxErrorsNameLineAndColumn) {
    EXPECT_EQ(parse_error("{{ 1 +* 2 }}"), "line 1, column 7: unexpected '*'");
    EXPECT_EQ(parse_error("ab\n  {% foo %}"), "line 2, column 6: encountered unknown tag 'foo'");
    EXPECT_NE(parse_error("{% if x %}\nno end").find("unexpected end of template; expected 'elif'"),
              std::string::npos);
    EXPECT_EQ(parse_error("x\n{{ 'open }}"), "line 2, column 4: unterminated string literal");
    EXPECT_EQ(parse_error("{{ (1 ] }}"), "line 1, column 7: unexpected ']', expected ')'");
    EXPECT_EQ(parse_error("{# never closed"), "line 1, column 1: missing end of comment tag");
    EXPECT_EQ(parse_error("{% for x in y %}{% endif %}"),
              "line 1, column 20: encountered unknown tag 'endif'");
    EXPECT_EQ(parse_error("{% break %}"), "line 1, column 4: 'break' outside of a loop");
    EXPECT_EQ(parse_error("{{ x is }}"),
              "line 1, column 9: expected a name, got 'end of print statement'");
    EXPECT_EQ(parse_error("\xff"), "template is not valid UTF-8");
}

TEST(JinjaErrors, RenderErrorsNameLineAndColumn) {
    EXPECT_EQ(render_error("Hi\n{{ x.y.z }}"), "line 2, column 5: 'x' is undefined");
    EXPECT_EQ(render_error("{% if true %}\n  {{ raise_exception('bad input') }}\n{% endif %}"),
              "line 2, column 3: bad input");
    EXPECT_EQ(render_error("{{ 'a' + 1 }}"),
              "line 1, column 8: can only concatenate str (not \"int\") to str");
    EXPECT_EQ(render_error("{% set d = {} %}\n\n   {{ d.k + 1 }}"),
              "line 3, column 11: 'dict object' has no attribute 'k'");
    EXPECT_EQ(render_error("{{ [1].append(2) }}"),
              "line 1, column 14: access to attribute 'append' of 'list' object is unsafe.");
}

TEST(JinjaLimits, StepLimitStopsEndlessWork) {
    RenderLimits limits;
    limits.max_steps = 100000;
    const std::string err = render_error(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", limits);
    EXPECT_NE(err.find("step limit"), std::string::npos) << err;
}

// With the default limits, what a model file's template can make a server do per request is
// bounded: nested loops of 10^10 iterations stop (bench_chat's render_hostile times them: well
// under a second of CPU).
TEST(JinjaLimits, DefaultLimitsStopNestedLoops) {
    for (const char* body : {"", "{% set x = a * b + a - b %}", "{{ '' }}"}) {
        const std::string err = render_error(std::string("{% for a in range(100000) %}{% for b in "
                                                         "range(100000) %}") +
                                             body + "{% endfor %}{% endfor %}");
        EXPECT_TRUE(err.find("step limit") != std::string::npos ||
                    err.find("work budget") != std::string::npos)
            << err;
    }
}

TEST(JinjaLimits, OutputLimit) {
    RenderLimits limits;
    limits.max_output_bytes = 1 << 20;
    const std::string err =
        render_error("{% for i in range(100000) %}{{ 'x' * 100 }}{% endfor %}", limits);
    EXPECT_NE(err.find("output exceeds"), std::string::npos) << err;
}

TEST(JinjaLimits, MemoryBudgetStopsExponentialGrowth) {
    RenderLimits limits;
    limits.max_work_units = 16 << 20;
    const std::string err = render_error(
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% "
        "endfor %}",
        limits);
    EXPECT_NE(err.find("work budget"), std::string::npos) << err;
    EXPECT_NE(render_error("{{ 'x' * 10 ** 12 }}").find("work budget"), std::string::npos);
    EXPECT_NE(render_error("{{ [1, 2] * 10 ** 12 }}").find("too large"), std::string::npos);
}

TEST(JinjaLimits, WorkBudgetStopsLoopsOverLargeStrings) {
    // Each iteration decodes, reverses and searches a 1 MB string: stopped by the work budget
    // long before the step limit.
    RenderLimits limits;
    limits.max_work_units = 64 << 20;
    const std::string err = render_error(
        "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% set n = s|length %}"
        "{% set t = s[::-1] %}{% set u = 'y' in s %}{% endfor %}",
        limits);
    EXPECT_NE(err.find("work budget"), std::string::npos) << err;
}

TEST(JinjaLimits, RecursionDepth) {
    const std::string err = render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
    EXPECT_NE(err.find("nested deeper than"), std::string::npos) << err;
}

TEST(JinjaLimits, ParserNestingDepth) {
    const std::string deep = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
    EXPECT_NE(parse_error(deep).find("nested too deeply"), std::string::npos);
    std::string blocks;
    for (int i = 0; i < 1000; ++i) blocks += "{% if true %}";
    EXPECT_NE(parse_error(blocks).find("nested deeper than"), std::string::npos);
    std::string nots = "{{ ";
    for (int i = 0; i < 5000; ++i) nots += "not ";
    EXPECT_NE(parse_error(nots + "1 }}").find("nested deeper than"), std::string::npos);
}

// Inputs the fuzzer found; each once crashed or misbehaved.
TEST(JinjaFuzzRegressions, SliceInsideTupleSubscript) {
    EXPECT_NE(parse_error("{% set x %}abc{% endset %}{{ x[1,:3] }}")
                  .find("slice inside a tuple subscript"),
              std::string::npos);
}

TEST(JinjaLimits, NamespaceCannotContainItself) {
    EXPECT_NE(
        render_error("{% set ns = namespace() %}{% set ns.me = [ns] %}").find("inside itself"),
        std::string::npos);
}

TEST(JinjaLimits, IntegerOverflowIsAnError) {
    EXPECT_NE(render_error("{{ 2 ** 64 }}").find("integer overflow"), std::string::npos);
    EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("integer overflow"),
              std::string::npos);
    EXPECT_EQ(render("{{ 2 ** 62 }}"), "4611686018427387904");
}

TEST(JinjaValues, FloatsPrintLikePythonRepr) {
    EXPECT_EQ(float_repr(1.0), "1.0");
    EXPECT_EQ(float_repr(-1.5), "-1.5");
    EXPECT_EQ(float_repr(0.1), "0.1");
    EXPECT_EQ(float_repr(1e16), "1e+16");
    EXPECT_EQ(float_repr(1e15), "1000000000000000.0");
    EXPECT_EQ(float_repr(123456789012345678.0), "1.2345678901234568e+17");
    EXPECT_EQ(float_repr(0.0001), "0.0001");
    EXPECT_EQ(float_repr(0.00001), "1e-05");
    EXPECT_EQ(float_repr(5e-324), "5e-324");
    EXPECT_EQ(float_repr(1.0 / 0.0), "inf");
}

TEST(JinjaValues, StringsAndContainersPrintLikePython) {
    EXPECT_EQ(string_repr("it's"), "\"it's\"");
    EXPECT_EQ(string_repr("a'b\"c"), "'a\\'b\"c'");
    EXPECT_EQ(string_repr("\x01\n\xc2\xa0\xc3\xa9"), "'\\x01\\n\\xa0\xc3\xa9'");
    Dict d;
    d.set(Value::string("k"),
          Value::list({Value::integer(1), Value::none(), Value::boolean(true)}, true));
    d.set(Value::integer(2), Value::number(2.5));
    EXPECT_EQ(py_str(Value::dict(d)), "{'k': (1, None, True), 2: 2.5}");
    EXPECT_EQ(py_str(Value::list({Value::string("a")}, true)), "('a',)");
    EXPECT_EQ(py_str(Value()), "");
}

TEST(JinjaValues, JsonDumpsLikePython) {
    const Value v =
        value_from_json(nlohmann::ordered_json::parse(R"({"b": [1, 2.0, "é\n"], "a": {}})"));
    JsonOptions options;
    EXPECT_EQ(json_dumps(v, options), R"({"b": [1, 2.0, "é\n"], "a": {}})");
    options.ensure_ascii = true;
    options.indent = "  ";
    options.item_separator = ",";
    EXPECT_EQ(json_dumps(v, options),
              "{\n  \"b\": [\n    1,\n    2.0,\n    \"\\u00e9\\n\"\n  ],\n  \"a\": {}\n}");
    EXPECT_THROW(json_dumps(Value(), options), EvalError);
}

TEST(JinjaValues, DictKeysFollowPythonHashing) {
    Dict d;
    d.set(Value::integer(1), Value::string("int"));
    d.set(Value::number(1.0), Value::string("float"));
    d.set(Value::boolean(true), Value::string("bool"));
    EXPECT_EQ(d.size(), 1u);
    EXPECT_EQ(d.find(Value::integer(1))->as_string(), "bool");
    EXPECT_THROW(d.set(Value::list({}), Value::none()), EvalError);
}

TEST(Unicode, PythonStringSemantics) {
    EXPECT_EQ(unicode::length("Grüße 🦙"), 7u);
    EXPECT_EQ(unicode::to_upper("straße ωμέγα"), "STRASSE ΩΜΈΓΑ");
    EXPECT_EQ(unicode::to_lower("ÀÉÎ ΣΑ ДОМ"), "àéî σα дом");
    EXPECT_EQ(unicode::python_title("hello o'neil 3rd"), "Hello O'Neil 3Rd");
    const std::string chars = "xy";
    EXPECT_EQ(unicode::strip("\xe3\x80\x80 a \t", nullptr, true, true), "a");
    EXPECT_EQ(unicode::strip("xyaxy", &chars, true, false), "axy");
    EXPECT_EQ(unicode::split_lines("a\r\nb\x0b"
                                   "c\n"),
              (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(unicode::decode("\xff"
                              "a")
                  .size(),
              2u);
}

}  // namespace
}  // namespace minfer::jinja
