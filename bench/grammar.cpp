// Token-mask speed of constrained generation: the time to compute the mask of allowed tokens at
// each step of a real JSON text, for the JSON grammar and for a schema with nested objects,
// arrays and enums and for tool calls (Qwen's syntax, tool_choice required and auto), on GPT-2's
// vocabulary (50,257 tokens, from ../shared) and on a vocabulary of Qwen2's size (151,936 tokens:
// GPT-2's pieces, then pairs of them and CJK characters, since Qwen2's own is too large to ship).
// Prints the per-vocabulary work done once at model load, the compile time of each grammar (median
// and slowest of 11), and
// mean / p50 / p99 / max mask time per token, for a grammar compiled for the request (cold: every
// state met for the first time) and again for the same grammar (warm: the state masks cached).
//
//   ./build/release/bench/bench_grammar

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "gguf/gguf_file.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_vocabulary.h"
#include "grammar/json_schema.h"
#include "runtime/tool_calling.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using minfer::grammar::CompiledGrammar;
using minfer::grammar::GrammarMatcher;
using minfer::grammar::GrammarVocabulary;
using minfer::grammar::TokenMask;

double ms_since(Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "role": {"enum": ["admin", "editor", "viewer", "guest"]},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "country": {"enum": ["DE", "FR", "JP", "US", "BR"]},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
      },
      "required": ["street", "city", "country"]
    },
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "projects": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "title": {"type": "string"},
          "status": {"enum": ["planned", "active", "done"]},
          "hours": {"type": "number"}
        },
        "required": ["title", "status"]
      }
    },
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "role", "address", "tags", "projects", "active"]
})";

const char* kSchemaText = R"({
  "name": "Mariana Okonkwo-Sørensen",
  "age": 41,
  "role": "editor",
  "address": {"street": "Rua das Laranjeiras 1520, apartamento 4", "city": "Rio de Janeiro", "country": "BR", "zip": "22240"},
  "tags": ["typography", "long-form journalism", "data visualisation", "日本語の記事"],
  "projects": [
    {"title": "Election night live page", "status": "done", "hours": 312.5},
    {"title": "Climate series: cities that flood", "status": "active", "hours": 87},
    {"title": "Style guide, third edition", "status": "planned"}
  ],
  "active": true
})";

const char* kJsonText = R"({
  "id": "c0a8012e-7d3f-4b8e-9f1a-2b6c5d4e3f21",
  "created": "2024-07-26T10:30:00Z",
  "title": "Quarterly report — Q2 \"revised\"",
  "authors": [{"name": "Ana Lima", "email": "ana@example.org"}, {"name": "Kenji 田中", "email": null}],
  "metrics": {"revenue": 1284503.75, "growth": -0.034, "customers": 48213, "churn": 2.1e-2},
  "regions": [
    {"code": "EU", "share": 0.41, "notes": "Strong in the north;\nweaker in the south."},
    {"code": "NA", "share": 0.37, "notes": ""},
    {"code": "APAC", "share": 0.22, "notes": "New office opened in Osaka 🎉"}
  ],
  "flags": [true, false, true, null],
  "summary": "Revenue grew in every region except Southern Europe, where two contracts ended early. The new pricing page lifted conversion by 0.8 points."
})";

const char* kToolCallText =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
    "{\"city\":\"Rio de Janeiro\",\"unit\":\"celsius\",\"days\":3}}\n</tool_call>";

const std::string kTextThenToolCallStorage =
    std::string("Let me look that up for you.\n") + kToolCallText;
const char* kTextThenToolCall = kTextThenToolCallStorage.c_str();

// Two tools in Qwen's (Hermes) syntax, and a third named `extra` when given (a new grammar).
std::string tools_gbnf(minfer::ToolChoice::Kind kind, const std::string& extra) {
    auto tools = nlohmann::ordered_json::parse(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "search", "parameters": {"type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
        "required": ["query"]}}}])");
    if (!extra.empty()) tools.push_back({{"type", "function"}, {"function", {{"name", extra}}}});
    return minfer::tool_call_grammar(minfer::chat::ToolCallFormat::Hermes, tools, {kind, ""}, true)
        .to_gbnf();
}

// Greedy longest match over the vocabulary's pieces: tokens of realistic lengths for the walk.
std::vector<int32_t> tokenize_greedy(const GrammarVocabulary& v, const std::string& text) {
    std::map<std::string, int32_t, std::less<>> by_piece;
    for (std::size_t r = 0; r < v.n_ranked(); ++r)
        by_piece.emplace(std::string(v.bytes_at(r)), v.id_at(r));
    std::vector<int32_t> out;
    for (std::size_t i = 0; i < text.size();) {
        std::size_t best = 0;
        int32_t id = -1;
        for (std::size_t n = 1; n <= 32 && i + n <= text.size(); ++n) {
            const auto it = by_piece.find(std::string_view(text).substr(i, n));
            if (it != by_piece.end()) best = n, id = it->second;
        }
        if (id < 0) {
            std::fprintf(stderr, "no token for byte %zu\n", i);
            std::exit(1);
        }
        out.push_back(id);
        i += best;
    }
    return out;
}

std::vector<std::string> gpt2_pieces() {
    const auto path =
        std::filesystem::path(MINFER_SHARED_DIR) / "fixtures/vocab/ggml-vocab-gpt-2.gguf";
    const auto file = minfer::GgufFile::open(path.string());
    const auto tok = minfer::Tokenizer::from_gguf(file.metadata());
    std::vector<std::string> pieces;
    for (int32_t id = 0; id < tok.n_vocab(); ++id) pieces.push_back(tok.token_to_piece(id, false));
    return pieces;
}

// GPT-2's pieces, then CJK characters and pairs of GPT-2 pieces up to Qwen2's 151,936.
std::vector<std::string> qwen_sized_pieces(const std::vector<std::string>& gpt2) {
    std::vector<std::string> pieces = gpt2;
    for (char32_t cp = 0x4E00; cp < 0x4E00 + 20000; ++cp) {
        std::string s;
        minfer::append_utf8(s, cp);
        pieces.push_back(s);
    }
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::size_t> pick(256, gpt2.size() - 2);
    while (pieces.size() < 151936) {
        std::string s = gpt2[pick(rng)] + gpt2[pick(rng)];
        if (s.size() <= 24 && minfer::is_valid_utf8(s)) pieces.push_back(std::move(s));
    }
    return pieces;
}

struct Percentiles {
    double mean, p50, p99, max;
};

Percentiles summarize(std::vector<double> us) {
    std::sort(us.begin(), us.end());
    double sum = 0;
    for (const double x : us) sum += x;
    const auto at = [&](double q) {
        return us[std::min(us.size() - 1,
                           static_cast<std::size_t>(q * static_cast<double>(us.size())))];
    };
    return {sum / static_cast<double>(us.size()), at(0.5), at(0.99), us.back()};
}

// Mask times (us) along the text's tokens; checks every token was allowed.
std::vector<double> walk(const std::shared_ptr<CompiledGrammar>& g,
                         const std::vector<int32_t>& tokens) {
    GrammarMatcher m(g);
    TokenMask mask(g->vocabulary().n_vocab());
    std::vector<double> us;
    for (const int32_t t : tokens) {
        const auto start = Clock::now();
        m.fill_mask(mask);
        us.push_back(ms_since(start) * 1000);
        if (!mask.test(t) || !m.accept(t)) {
            std::fprintf(stderr, "token %d not allowed\n", t);
            std::exit(1);
        }
    }
    return us;
}

void bench_vocabulary(const char* name, std::vector<std::string> pieces) {
    pieces.emplace_back();  // an end-of-generation token
    const auto eog = static_cast<int32_t>(pieces.size() - 1);
    auto start = Clock::now();
    auto vocab = std::make_shared<const GrammarVocabulary>(
        std::move(pieces), std::vector<int32_t>{eog}, std::unordered_map<std::string, int32_t>{});
    const double build_ms = ms_since(start);
    // Once per model: the JSON grammar's masks, which every JSON schema shares.
    start = Clock::now();
    const auto warm = CompiledGrammar::compile(
        minfer::grammar::parse_gbnf(minfer::grammar::json_object_gbnf()), vocab);
    const std::size_t positions = warm->precompute();
    const double precompute_ms = ms_since(start);
    std::printf(
        "\n%s: %d tokens. Once per model: vocabulary %.1f ms, JSON masks %.1f ms (%zu positions)\n",
        name, vocab->n_vocab(), build_ms, precompute_ms, positions);
    std::printf("%-14s %8s %8s %7s %6s %9s %9s %9s %9s\n", "grammar", "compile", "(max)",
                "tokens", "pass", "mean us", "p50 us", "p99 us", "max us");
    const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(kSchema);
    const struct {
        const char* name;
        std::string gbnf;
        const char* text;
    } cases[] = {
        {"json", minfer::grammar::json_object_gbnf(), kJsonText},
        {"schema", minfer::grammar::json_schema_to_gbnf(schema), kSchemaText},
        {"tools-required", tools_gbnf(minfer::ToolChoice::Kind::Required, ""), kToolCallText},
        {"tools-auto", tools_gbnf(minfer::ToolChoice::Kind::Auto, ""), kTextThenToolCall},
    };
    for (const auto& c : cases) {
        const auto tokens = tokenize_greedy(*vocab, c.text);
        // Compile time as a request pays it: schema -> grammar -> every position's masks. Each
        // round renames a property, so that its positions are new to the vocabulary's cache.
        std::vector<double> compile_ms;
        for (int i = 0; i < 11; ++i) {
            const auto t = Clock::now();
            std::string gbnf = c.gbnf;
            if (std::string(c.name) == "schema") {
                nlohmann::ordered_json variant = schema;
                variant["properties"][std::string("field") + std::to_string(i)] = {
                    {"type", "integer"}};
                gbnf = minfer::grammar::json_schema_to_gbnf(variant);
            }
            auto compiled = CompiledGrammar::compile(minfer::grammar::parse_gbnf(gbnf), vocab);
            compile_ms.push_back(ms_since(t));
        }
        std::sort(compile_ms.begin(), compile_ms.end());
        const auto g = CompiledGrammar::compile(minfer::grammar::parse_gbnf(c.gbnf), vocab);
        for (const char* pass : {"cold", "warm"}) {
            const Percentiles p = summarize(walk(g, tokens));
            std::printf("%-14s %6.2fms %6.2fms %7zu %6s %9.1f %9.1f %9.1f %9.1f\n", c.name,
                        compile_ms[5], compile_ms[10], tokens.size(), pass, p.mean, p.p50, p.p99,
                        p.max);
        }
        const auto stats = g->stats();
        std::printf("%-14s positions computed %zu, shared %zu; automaton states %zu\n", "",
                    stats.positions_computed, stats.positions_shared, stats.states);
    }
}

}  // namespace

int main() {
    const auto gpt2 = gpt2_pieces();
    bench_vocabulary("GPT-2", gpt2);
    bench_vocabulary("Qwen2-sized", qwen_sized_pieces(gpt2));
    return 0;
}
