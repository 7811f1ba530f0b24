#pragma once
// The fixed pieces of the grammars json_schema.cpp writes: JSON's primitive values, whitespace,
// string formats, and decimal integers within a range.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace minfer::grammar::json_parts {

// Every builtin rule's name (a schema's own rules never take these names).
inline constexpr const char* kBuiltinNames[] = {"ws",      "char", "string",    "integer", "number",
                                                "boolean", "null", "value",     "object",  "array",
                                                "date",    "time", "date-time", "uuid"};

// "name ::= ..." for a builtin rule, and the builtins its body refers to.
std::string builtin_rule(const std::string& name);
std::vector<std::string> builtin_dependencies(const std::string& name);

// date, time, date-time, uuid.
bool is_format(const std::string& name);

// The decimal integers from lo to hi (a missing bound: 16 digits), as GBNF alternatives.
std::string integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace minfer::grammar::json_parts
