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

// A bound of a number range: a value, and whether it is excluded.
struct NumberBound {
    double value = 0;
    bool exclusive = false;
};
// Decimal numbers (up to 16 digits each side of the point, no exponent) within the bounds, as
// GBNF alternatives: exact where a bound is an integer; where it is not, the numbers between it
// and the nearest integer inside are left out (a subset, still valid). Empty when none remain.
std::string number_range(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace minfer::grammar::json_parts
