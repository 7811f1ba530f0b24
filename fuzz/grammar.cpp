// libFuzzer target for constrained generation: the GBNF parser, the JSON Schema converter and
// the regular expressions of `pattern`, each compiled for a small vocabulary and then matched
// against bytes. The first byte picks the input's kind (0: GBNF, 1: a JSON schema, 2: a
// pattern); after a NUL byte comes text to feed the matcher. Any minfer::Error is an accepted
// outcome; a crash, a hang or unbounded memory is a finding.
//
// LLVMFuzzerInitialize writes seed inputs (grammars of every construct, hostile schemas: deep
// nesting, a huge enum, a $ref without base case, catastrophic patterns) into
// $MINFER_FUZZ_SEED_DIR when that folder is set and empty.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "core/error.h"
#include "grammar/compiled_grammar.h"
#include "grammar/json_schema.h"
#include "grammar/regex_pattern.h"
#include "seed_dir.h"

namespace {

using namespace minfer::grammar;

std::shared_ptr<const GrammarVocabulary> vocabulary() {
    static const auto v = [] {
        std::vector<std::string> pieces;
        for (int b = 0; b < 256; ++b) pieces.emplace_back(1, static_cast<char>(b));
        for (const char* s : {"{\"", "\":", "\", \"", "true", "null", "12", " the", "é", "日本",
                              "\xF0\x9F", "ab", "abc", "\n  ", "<tool_call>", "[TOOL"})
            pieces.emplace_back(s);
        pieces.emplace_back();  // end of generation
        pieces.emplace_back();  // a control token
        const auto n = static_cast<int32_t>(pieces.size());
        return std::make_shared<const GrammarVocabulary>(
            std::move(pieces), std::vector<int32_t>{n - 2},
            std::unordered_map<std::string, int32_t>{{"<|special|>", n - 1}});
    }();
    return v;
}

std::string deep_schema(int levels) {
    std::string s;
    for (int i = 0; i < levels; ++i) s += R"({"type": "array", "items": )";
    s += "{}";
    for (int i = 0; i < levels; ++i) s += "}";
    return s;
}

std::string big_enum(int n) {
    std::string s = R"({"enum": [)";
    for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(i * 7919);
    return s + "]}";
}

void write_seed(const std::filesystem::path& dir, int& n, char kind, const std::string& text,
                const std::string& feed = "") {
    std::string bytes(1, kind);
    bytes += text;
    if (!feed.empty()) bytes += '\0' + feed;
    std::ofstream(dir / ("seed-" + std::to_string(n++)), std::ios::binary) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const auto seed_dir = minfer::fuzz::empty_seed_dir();
    if (!seed_dir) return 0;
    const std::filesystem::path& dir = *seed_dir;
    int n = 0;
    write_seed(dir, n, 0,
               "root ::= \"yes\" | \"no\" | answer\nanswer ::= [a-z]+ (\",\" [a-z]+){0,3}",
               "abc,de");
    write_seed(dir, n, 0, "root ::= (\"<tool_call>\" [^\\x00-\\x1F]* \"</tool_call>\")+ .? [^]",
               "<tool_call>x");
    write_seed(dir, n, 0, "root ::= x\nx ::= \"(\" x? \")\" | [0-9]{2,5} \"\\u00e9\"", "((12é))");
    write_seed(dir, n, 0, "root ::= a\na ::= a \"x\" | \"y\"", "yx");
    write_seed(dir, n, 0, "root ::= (\"a\"?)* \"<|special|>\" \"b\"{0,10000}", "aab");
    write_seed(dir, n, 1,
               R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5},
                 "n": {"type": "integer", "minimum": -20, "maximum": 300}, "t": {"type": "array",
                 "items": {"enum": ["a", 1, null]}}, "d": {"type": "string", "format": "date"}},
                 "required": ["name"], "additionalProperties": {"type": "boolean"}})",
               R"({"name": "ab", "n": 299)");
    write_seed(dir, n, 1, deep_schema(10000), "[[[[");
    write_seed(dir, n, 1, big_enum(20000), "1");
    write_seed(dir, n, 1, R"({"$ref": "#"})", "x");
    write_seed(dir, n, 1, R"({"properties": {"a": {"$ref": "#"}}, "required": ["a"]})", "{");
    write_seed(dir, n, 1, R"({"$defs": {"n": {"anyOf": [{"type": "null"}, {"type": "array",
                 "items": {"$ref": "#/$defs/n"}}]}}, "$ref": "#/$defs/n"})",
               "[[null,[]]]");
    write_seed(dir, n, 2, "^(a+)+$", "aaaa");
    write_seed(dir, n, 2, "^(x|x|x)*(a*)*[\\d\\w\\s-]{2,9}?(?:ab|cd)\\u00e9$", "xxab");
    write_seed(dir, n, 2, "((((((((((a*)*)*)*)*)*)*)*)*)*)*b", "aab");
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
    const std::size_t split = input.find('\0');
    const std::string_view text = input.substr(0, split);
    const std::string_view feed =
        split == std::string_view::npos ? std::string_view{} : input.substr(split + 1);
    try {
        Grammar g;
        switch (data[0] % 3) {
            case 0:
                g = parse_gbnf(text);
                break;
            case 1:
                g = parse_gbnf(json_schema_to_gbnf(parse_json_schema_text(text)));
                break;
            default:
                g = parse_gbnf("root ::= " + expr_to_gbnf(regex_to_expr(text, data[0] & 4)));
                break;
        }
        // Printing must give a grammar that parses again.
        parse_gbnf(g.to_gbnf());
        const auto compiled = CompiledGrammar::compile(g, vocabulary(), /*eager=*/false);
        GrammarMatcher m(compiled);
        TokenMask mask(vocabulary()->n_vocab());
        m.fill_mask(mask);
        for (std::size_t i = 0; i < feed.size() && i < 256; ++i) {
            if (!m.accept_bytes(feed.substr(i, 1))) break;
            m.fill_mask(mask);
        }
    } catch (const minfer::Error&) {
    }
    return 0;
}
