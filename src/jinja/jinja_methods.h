#pragma once
// Python methods that templates call on values: str (strip, split, startswith, format, ...),
// dict (items, keys, values, get) and list (index, count). Methods that would modify a value
// (list.append, dict.update, ...) are refused like Hugging Face's immutable sandbox does: the
// attribute is undefined and calling it fails with "access to attribute ... is unsafe".

#include <optional>
#include <string>

#include "jinja/jinja_value.h"

namespace minfer::jinja {

// The bound method `obj.name`, an "unsafe" undefined for mutating methods, or nullopt when
// the type has no such method.
std::optional<Value> builtin_method(const Value& obj, const std::string& name);

}  // namespace minfer::jinja
