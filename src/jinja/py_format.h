#pragma once
// How Python prints values: str() and repr() of ints, floats, strings and containers, and
// json.dumps as Hugging Face's `tojson` filter calls it.

#include <optional>
#include <string>

#include "jinja/jinja_value.h"

namespace minfer::jinja {

// repr(float): shortest round-trip digits, '1.0', '1e+16', 'inf', 'nan'.
std::string float_repr(double f);
// repr(str): quoted with ' (or " when the text has ' but no "), escapes as Python does.
std::string string_repr(const std::string& s);
// repr(value): what Python prints for an element of a container.
std::string py_repr(const Value& v);
// str(value): what `{{ value }}` prints. Undefined prints as ''.
std::string py_str(const Value& v);

struct JsonOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;  // nullopt: one line
    std::string item_separator = ", ";
    std::string key_separator = ": ";
    bool sort_keys = false;
};
// json.dumps(value, ...). Throws EvalError for values JSON cannot hold (undefined, generators).
std::string json_dumps(const Value& v, const JsonOptions& options);

}  // namespace minfer::jinja
