// jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...).

#include <cmath>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_interpreter.h"
#include "jinja/jinja_ops.h"
#include "jinja/py_format.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {

namespace {

const Value& one_arg(const CallArgs& args, std::string_view test) {
    const auto b = bind_args(test, args, {"other"});
    if (!b[0]) throw EvalError(concat("test '", test, "' needs an argument"));
    return args.positional.empty() ? args.keyword.front().second : args.positional.front();
}

void no_args(const CallArgs& args, std::string_view test) {
    bind_args(test, args, {});
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "defined"), !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "undefined"), v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "none"), v.is_none();
}
bool t_string(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "string"), v.is_string();
}
bool t_number(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "number"), v.is_number();
}
bool t_integer(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "integer"), v.is_int();
}
bool t_float(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "float"), v.is_float();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "boolean"), v.is_bool();
}
bool t_true(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "true"), v.is_bool() && v.as_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "false"), v.is_bool() && !v.as_bool();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "mapping"), v.is_dict();
}

bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
    no_args(a, "iterable");
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() ||
           (v.is_object() && dynamic_cast<IteratorObject*>(&v.as_object()) != nullptr);
}

bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
    no_args(a, "sequence");
    return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}

bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
    no_args(a, "callable");
    return v.is_object() && v.as_object().is_callable();
}

bool t_eq(Interpreter&, const Value& v, CallArgs& a) {
    return equals(v, one_arg(a, "eq"));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& a) {
    return !equals(v, one_arg(a, "ne"));
}
bool t_lt(Interpreter&, const Value& v, CallArgs& a) {
    return less_than(v, one_arg(a, "lt"));
}
bool t_gt(Interpreter&, const Value& v, CallArgs& a) {
    return less_than(one_arg(a, "gt"), v);
}
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
    return compare(CompareOp::Le, v, one_arg(a, "le"));
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
    return compare(CompareOp::Ge, v, one_arg(a, "ge"));
}
bool t_in(Interpreter&, const Value& v, CallArgs& a) {
    return contains(one_arg(a, "in"), v);
}
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
    const Value& other = one_arg(a, "sameas");
    if (v.is_none() || v.is_bool() || v.is_undefined())
        return v.kind() == other.kind() && equals(v, other);
    return v.identity() != nullptr && v.identity() == other.identity();
}

bool t_divisibleby(Interpreter& interp, const Value& v, CallArgs& a) {
    return equals(binary(BinaryOp::Mod, v, one_arg(a, "divisibleby"), interp.budget()),
                  Value::integer(0));
}
bool t_odd(Interpreter& interp, const Value& v, CallArgs& a) {
    no_args(a, "odd");
    return equals(binary(BinaryOp::Mod, v, Value::integer(2), interp.budget()), Value::integer(1));
}
bool t_even(Interpreter& interp, const Value& v, CallArgs& a) {
    no_args(a, "even");
    return equals(binary(BinaryOp::Mod, v, Value::integer(2), interp.budget()), Value::integer(0));
}

// str.islower()/isupper(): at least one cased character and none of the other case.
bool has_case(const Value& v, bool want_lower) {
    const std::string s = py_str(v);
    const std::string other = want_lower ? unicode::to_lower(s) : unicode::to_upper(s);
    const std::string flipped = want_lower ? unicode::to_upper(s) : unicode::to_lower(s);
    return s == other && s != flipped;
}
bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "lower"), has_case(v, true);
}
bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "upper"), has_case(v, false);
}
bool t_escaped(Interpreter&, const Value& v, CallArgs& a) {
    return no_args(a, "escaped"), v.is_markup();
}
bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
    no_args(a, "filter");
    return v.is_string() && find_filter(v.as_string()) != nullptr;
}
bool t_test(Interpreter&, const Value& v, CallArgs& a) {
    no_args(a, "test");
    return v.is_string() && find_test(v.as_string()) != nullptr;
}

struct NamedTest {
    std::string_view name;
    TestFn fn;
};

constexpr NamedTest kTests[] = {
    {"defined", t_defined},
    {"undefined", t_undefined},
    {"none", t_none},
    {"string", t_string},
    {"number", t_number},
    {"integer", t_integer},
    {"float", t_float},
    {"boolean", t_boolean},
    {"true", t_true},
    {"false", t_false},
    {"mapping", t_mapping},
    {"iterable", t_iterable},
    {"sequence", t_sequence},
    {"callable", t_callable},
    {"eq", t_eq},
    {"equalto", t_eq},
    {"==", t_eq},
    {"ne", t_ne},
    {"!=", t_ne},
    {"lt", t_lt},
    {"lessthan", t_lt},
    {"<", t_lt},
    {"le", t_le},
    {"<=", t_le},
    {"gt", t_gt},
    {"greaterthan", t_gt},
    {">", t_gt},
    {"ge", t_ge},
    {">=", t_ge},
    {"in", t_in},
    {"sameas", t_sameas},
    {"divisibleby", t_divisibleby},
    {"odd", t_odd},
    {"even", t_even},
    {"lower", t_lower},
    {"upper", t_upper},
    {"escaped", t_escaped},
    {"filter", t_filter},
    {"test", t_test},
};

}  // namespace

TestFn find_test(std::string_view name) {
    for (const auto& t : kTests)
        if (t.name == name) return t.fn;
    return nullptr;
}

}  // namespace minfer::jinja
