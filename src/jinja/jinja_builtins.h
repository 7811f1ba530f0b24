#pragma once
// The filters, tests and global functions a template can use (jinja2's builtins plus Hugging
// Face's `tojson`, `raise_exception` and `strftime_now`).

#include <optional>
#include <string>
#include <string_view>

#include "jinja/jinja_value.h"

namespace minfer::jinja {

using FilterFn = Value (*)(Interpreter& interp, const Value& input, CallArgs& args);
using TestFn = bool (*)(Interpreter& interp, const Value& input, CallArgs& args);

FilterFn find_filter(std::string_view name);  // nullptr when there is no such filter
TestFn find_test(std::string_view name);      // nullptr when there is no such test
// range, dict, namespace, cycler, joiner, raise_exception, strftime_now; nullopt otherwise.
std::optional<Value> builtin_global(std::string_view name);

// raise_exception(message): the template's own error, reported with its message as is.
class RaisedError : public EvalError {
  public:
    using EvalError::EvalError;
};

}  // namespace minfer::jinja
