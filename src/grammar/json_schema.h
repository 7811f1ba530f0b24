#pragma once
// JSON Schema to GBNF: a grammar whose every sentence is a JSON text valid under the schema.
//
// Honoured: type (one or a list; null included), properties, required, additionalProperties
// (false, true or a schema; when absent, only the declared properties are generated, which is
// valid under the schema), enum, const, items / prefixItems, minItems / maxItems, minLength /
// maxLength, pattern (regex_pattern.h), format (date, time, date-time, uuid), minimum / maximum /
// exclusiveMinimum / exclusiveMaximum on integers (and on numbers, which then get integers),
// anyOf / oneOf (as alternatives), allOf (merged), $ref / $defs / definitions (local, recursion
// included). Annotations (title, description, default, examples, $schema, $id, $comment,
// deprecated, readOnly, writeOnly) are ignored. Anything else is a UsageError naming the keyword
// and where it is ("unsupported keyword 'multipleOf' at #/properties/n"), never silently ignored.
//
// Properties come out in the schema's order. Numbers have at most 16 digits before the point,
// 16 after it and 3 in the exponent; whitespace between tokens is at most a newline and 20
// spaces or tabs: every finished text stays short, which small or confused models need to finish.

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace minfer::grammar {

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema);

// Several schemas in one grammar (the parameters of each tool), with rules of one's own around
// them. Rule names are made unique from the hints given.
class JsonGrammarBuilder {
  public:
    JsonGrammarBuilder();
    ~JsonGrammarBuilder();
    // The name of a rule matching the schema's values ($refs resolve within `schema`).
    std::string add_schema(const nlohmann::ordered_json& schema, const std::string& name);
    // A rule of GBNF text; returns its name.
    std::string add_rule(const std::string& hint, const std::string& body);
    // A unique rule name for a rule the caller writes itself.
    std::string reserve_name(const std::string& hint);
    // A builtin rule by name (ws, string, value, ...), emitted with the rules.
    std::string builtin(const std::string& name);
    // Every rule, one a line (without a root: the caller writes `root ::= ...`).
    std::string rules() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Parses the JSON text of a schema (a flag, a file): UsageError for malformed JSON or nesting
// deeper than kMaxSchemaTextDepth, before any conversion.
nlohmann::ordered_json parse_json_schema_text(std::string_view text);

// The grammar of any JSON value (response_format json_object): an object at the top.
std::string json_object_gbnf();

inline constexpr int kMaxSchemaDepth = 128;
inline constexpr int kMaxSchemaTextDepth = 512;
inline constexpr std::size_t kMaxEnumValues = 10000;
inline constexpr std::size_t kMaxTupleItems = 1000;

}  // namespace minfer::grammar
