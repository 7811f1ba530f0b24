#include "jinja/jinja_ops.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <utility>

#include "jinja/jinja_methods.h"
#include "jinja/py_format.h"
#include "jinja/py_string_format.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {

void Budget::charge(uint64_t units) {
    if (units > left_)
        throw EvalError(
            "template exceeds its work budget (too much string or list data made or processed)");
    left_ -= units;
}

namespace {
thread_local Budget* active_budget = nullptr;
}  // namespace

void charge_work(uint64_t units) {
    if (active_budget != nullptr) active_budget->charge(units);
}

uint64_t work_size(const Value& v) {
    if (v.is_string()) return v.as_string().size();
    if (v.is_list()) return v.items().size() * kWorkUnitsPerItem;
    if (v.is_dict()) return v.as_dict().size() * kWorkUnitsPerItem;
    return 1;
}

WorkScope::WorkScope(Budget& budget) : previous_(std::exchange(active_budget, &budget)) {}
WorkScope::~WorkScope() {
    active_budget = previous_;
}

[[noreturn]] void fail_undefined(const Value& v) {
    const std::string& hint = v.undefined_hint();
    throw EvalError(hint.empty() ? std::string("value is undefined") : hint);
}

namespace {

bool both_ints(const Value& a, const Value& b) {
    return (a.is_int() || a.is_bool()) && (b.is_int() || b.is_bool());
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
    throw EvalError(concat("unsupported operand type(s) for ", op, ": '", a.type_name(), "' and '",
                           b.type_name(), "'"));
}

[[noreturn]] void overflow() {
    throw EvalError("integer overflow (template integers are 64-bit)");
}

int64_t add_int(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_add_overflow(a, b, &r)) overflow();
    return r;
}
int64_t sub_int(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_sub_overflow(a, b, &r)) overflow();
    return r;
}
int64_t mul_int(int64_t a, int64_t b) {
    int64_t r = 0;
    if (__builtin_mul_overflow(a, b, &r)) overflow();
    return r;
}

Value repeat(const Value& seq, int64_t times, Budget& budget) {
    const int64_t n = std::max<int64_t>(times, 0);
    if (seq.is_string()) {
        const std::string& s = seq.as_string();
        if (!s.empty() && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / s.size())
            throw EvalError("string repetition too large");
        budget.charge(s.size() * static_cast<uint64_t>(n));
        std::string out;
        out.reserve(s.size() * static_cast<std::size_t>(n));
        for (int64_t i = 0; i < n; ++i) out += s;
        return Value::string(std::move(out));
    }
    const auto& items = seq.items();
    if (!items.empty() && static_cast<uint64_t>(n) > (uint64_t{1} << 40) / items.size())
        throw EvalError("list repetition too large");
    budget.charge(items.size() * static_cast<uint64_t>(n));
    std::vector<Value> out;
    out.reserve(items.size() * static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
    return Value::list(std::move(out), seq.is_tuple());
}

Value add(const Value& a, const Value& b, Budget& budget) {
    if (both_ints(a, b)) {
        return Value::integer(add_int(a.as_int(), b.as_int()));
    }
    if (a.is_number() && b.is_number()) return Value::number(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
        budget.charge(a.as_string().size() + b.as_string().size());
        // Markup + str escapes the plain side (markupsafe), whichever side the Markup is on.
        const bool markup = a.is_markup() || b.is_markup();
        const std::string left =
            markup && !a.is_markup() ? html_escape(a.as_string()) : a.as_string();
        const std::string right =
            markup && !b.is_markup() ? html_escape(b.as_string()) : b.as_string();
        return Value::string(left + right, markup);
    }
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        budget.charge(a.items().size() + b.items().size());
        std::vector<Value> out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(out), a.is_tuple());
    }
    if (a.is_string() || a.is_list())
        throw EvalError(concat(
            "can only concatenate ", a.type_name() == "Markup" ? "str" : a.type_name(), " (not \"",
            b.type_name(), "\") to ", a.type_name() == "Markup" ? "str" : a.type_name()));
    unsupported("+", a, b);
}

double python_fmod(double a, double b) {
    double m = std::fmod(a, b);
    if (m != 0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

Value power(const Value& a, const Value& b) {
    if (both_ints(a, b) && b.as_int() >= 0) {
        int64_t result = 1, base = a.as_int(), exp = b.as_int();
        while (exp > 0) {
            if (exp & 1) result = mul_int(result, base);
            exp >>= 1;
            if (exp > 0) base = mul_int(base, base);
        }
        return Value::integer(result);
    }
    if (!a.is_number() || !b.is_number()) unsupported("** or pow()", a, b);
    if (a.as_float() == 0 && b.as_float() < 0)
        throw EvalError("0.0 cannot be raised to a negative power");
    return Value::number(std::pow(a.as_float(), b.as_float()));
}

}  // namespace

bool truthy(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
        case Kind::None:
            return false;
        case Kind::Bool:
        case Kind::Int:
            return v.as_int() != 0;
        case Kind::Float:
            return v.as_float() != 0;
        case Kind::String:
            return !v.as_string().empty();
        case Kind::List:
            return !v.items().empty();
        case Kind::Dict:
            return !v.as_dict().empty();
        case Kind::Object:
            return true;
    }
    return false;
}

bool equals(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) {
        if (both_ints(a, b)) return a.as_int() == b.as_int();
        return a.as_float() == b.as_float();
    }
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::Undefined:
        case Kind::None:
            return true;
        case Kind::String:
            charge_work(std::min(a.as_string().size(), b.as_string().size()));
            return a.as_string() == b.as_string();
        case Kind::List: {
            if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
            for (std::size_t i = 0; i < a.items().size(); ++i)
                if (!equals(a.items()[i], b.items()[i])) return false;
            return true;
        }
        case Kind::Dict: {
            if (a.as_dict().size() != b.as_dict().size()) return false;
            for (const auto& [key, value] : a.as_dict().entries()) {
                const Value* other = b.as_dict().find(key);
                if (other == nullptr || !equals(value, *other)) return false;
            }
            return true;
        }
        case Kind::Object:
            return a.identity() == b.identity();
        default:
            return false;
    }
}

bool less_than(const Value& a, const Value& b) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    if (a.is_number() && b.is_number()) {
        if (both_ints(a, b)) return a.as_int() < b.as_int();
        return a.as_float() < b.as_float();
    }
    if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
        const auto &x = a.items(), &y = b.items();
        for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
            if (equals(x[i], y[i])) continue;
            return less_than(x[i], y[i]);
        }
        return x.size() < y.size();
    }
    throw EvalError(concat("'<' not supported between instances of '", a.type_name(), "' and '",
                           b.type_name(), "'"));
}

bool compare(CompareOp op, const Value& a, const Value& b) {
    switch (op) {
        case CompareOp::Eq:
            return equals(a, b);
        case CompareOp::Ne:
            return !equals(a, b);
        case CompareOp::Lt:
            return less_than(a, b);
        case CompareOp::Le:
            return less_than(a, b) || equals(a, b);
        case CompareOp::Gt:
            return less_than(b, a);
        case CompareOp::Ge:
            return less_than(b, a) || equals(a, b);
        case CompareOp::In:
            return contains(b, a);
        case CompareOp::NotIn:
            return !contains(b, a);
    }
    return false;
}

Value binary(BinaryOp op, const Value& a, const Value& b, Budget& budget) {
    if (a.is_undefined()) fail_undefined(a);
    if (b.is_undefined()) fail_undefined(b);
    switch (op) {
        case BinaryOp::Add:
            return add(a, b, budget);
        case BinaryOp::Sub:
            if (both_ints(a, b)) {
                return Value::integer(sub_int(a.as_int(), b.as_int()));
            }
            if (a.is_number() && b.is_number()) return Value::number(a.as_float() - b.as_float());
            unsupported("-", a, b);
        case BinaryOp::Mul:
            if (both_ints(a, b)) {
                return Value::integer(mul_int(a.as_int(), b.as_int()));
            }
            if (a.is_number() && b.is_number()) return Value::number(a.as_float() * b.as_float());
            if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool()))
                return repeat(a, b.as_int(), budget);
            if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool()))
                return repeat(b, a.as_int(), budget);
            if (a.is_string() || a.is_list() || b.is_string() || b.is_list())
                throw EvalError(concat("can't multiply sequence by non-int of type '",
                                       (a.is_string() || a.is_list() ? b : a).type_name(), "'"));
            unsupported("*", a, b);
        case BinaryOp::Div:
            if (!a.is_number() || !b.is_number()) unsupported("/", a, b);
            if (b.as_float() == 0) throw EvalError("division by zero");
            return Value::number(a.as_float() / b.as_float());
        case BinaryOp::FloorDiv:
            if (!a.is_number() || !b.is_number()) unsupported("//", a, b);
            if (both_ints(a, b)) {
                if (b.as_int() == 0) throw EvalError("integer division or modulo by zero");
                if (a.as_int() == INT64_MIN && b.as_int() == -1) overflow();
                int64_t q = a.as_int() / b.as_int();
                if ((a.as_int() % b.as_int() != 0) && ((a.as_int() < 0) != (b.as_int() < 0))) --q;
                return Value::integer(q);
            }
            if (b.as_float() == 0) throw EvalError("float floor division by zero");
            return Value::number(std::floor(a.as_float() / b.as_float()));
        case BinaryOp::Mod:
            if (a.is_string()) {
                std::string out = percent_format(a.as_string(), b);
                budget.charge(out.size());
                return Value::string(std::move(out));
            }
            if (!a.is_number() || !b.is_number()) unsupported("%", a, b);
            if (both_ints(a, b)) {
                if (b.as_int() == 0) throw EvalError("integer division or modulo by zero");
                if (b.as_int() == -1) return Value::integer(0);
                int64_t m = a.as_int() % b.as_int();
                if (m != 0 && ((m < 0) != (b.as_int() < 0))) m += b.as_int();
                return Value::integer(m);
            }
            if (b.as_float() == 0) throw EvalError("float modulo");
            return Value::number(python_fmod(a.as_float(), b.as_float()));
        case BinaryOp::Pow:
            return power(a, b);
    }
    return Value();
}

Value negate(const Value& v) {
    if (v.is_undefined()) fail_undefined(v);
    if (v.is_int() || v.is_bool()) {
        if (v.as_int() == INT64_MIN) overflow();
        return Value::integer(-v.as_int());
    }
    if (v.is_float()) return Value::number(-v.as_float());
    throw EvalError(concat("bad operand type for unary -: '", v.type_name(), "'"));
}

bool contains(const Value& container, const Value& item) {
    charge_work(work_size(container));
    switch (container.kind()) {
        case Kind::Undefined:
            return false;
        case Kind::String:
            if (!item.is_string())
                throw EvalError(concat("'in <string>' requires string as left operand, not ",
                                       item.type_name()));
            return container.as_string().find(item.as_string()) != std::string::npos;
        case Kind::List:
            for (const Value& v : container.items())
                if (equals(v, item)) return true;
            return false;
        case Kind::Dict:
            if (!hash_key(item))
                throw EvalError(concat("unhashable type: '", item.type_name(), "'"));
            return container.as_dict().find(item) != nullptr;
        case Kind::Object:
            if (dynamic_cast<IteratorObject*>(&container.as_object()) != nullptr) {
                for (const Value& v : iterate(container))
                    if (equals(v, item)) return true;
                return false;
            }
            break;
        default:
            break;
    }
    throw EvalError(concat("argument of type '", container.type_name(), "' is not iterable"));
}

std::vector<Value> iterate(const Value& v) {
    charge_work(work_size(v));
    switch (v.kind()) {
        case Kind::Undefined:
            return {};
        case Kind::String: {
            std::vector<Value> out;
            for (char32_t cp : unicode::decode(v.as_string())) {
                std::string ch;
                unicode::append_utf8(ch, cp);
                out.push_back(Value::string(std::move(ch), v.is_markup()));
            }
            return out;
        }
        case Kind::List:
            return v.items();
        case Kind::Dict: {
            std::vector<Value> keys;
            keys.reserve(v.as_dict().size());
            for (const auto& [key, value] : v.as_dict().entries()) keys.push_back(key);
            return keys;
        }
        case Kind::Object:
            if (auto* it = dynamic_cast<IteratorObject*>(&v.as_object())) return it->take();
            break;
        default:
            break;
    }
    throw EvalError(concat("'", v.type_name(), "' object is not iterable"));
}

int64_t length(const Value& v) {
    if (v.is_string()) charge_work(v.as_string().size());  // counting code points decodes
    switch (v.kind()) {
        case Kind::Undefined:
            return 0;
        case Kind::String:
            return static_cast<int64_t>(unicode::length(v.as_string()));
        case Kind::List:
            return static_cast<int64_t>(v.items().size());
        case Kind::Dict:
            return static_cast<int64_t>(v.as_dict().size());
        default:
            throw EvalError(concat("object of type '", v.type_name(), "' has no len()"));
    }
}

std::string object_type_repr(const Value& v) {
    if (v.is_none()) return "None";
    return concat("'", v.type_name(), " object'");
}

namespace {

Value missing(const Value& obj, const Value& name) {
    if (name.is_string())
        return Value::undefined(
            concat(object_type_repr(obj), " has no attribute '", name.as_string(), "'"));
    return Value::undefined(concat(object_type_repr(obj), " has no element ", py_repr(name)));
}

// obj[key] by Python's rules; nullopt where Python raises TypeError/LookupError.
std::optional<Value> python_getitem(const Value& obj, const Value& key) {
    if (obj.is_string()) charge_work(obj.as_string().size());  // indexing decodes
    if (obj.is_dict()) {
        const Value* v = obj.as_dict().find(key);
        if (v) return *v;
        return std::nullopt;
    }
    if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
        if (obj.is_list()) {
            const auto n = static_cast<int64_t>(obj.items().size());
            int64_t i = key.as_int();
            if (i < 0) i += n;
            if (i < 0 || i >= n) return std::nullopt;
            return obj.items()[static_cast<std::size_t>(i)];
        }
        const std::vector<char32_t> cps = unicode::decode(obj.as_string());
        const auto n = static_cast<int64_t>(cps.size());
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return std::nullopt;
        std::string ch;
        unicode::append_utf8(ch, cps[static_cast<std::size_t>(i)]);
        return Value::string(std::move(ch), obj.is_markup());
    }
    return std::nullopt;
}

}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
    if (obj.is_undefined()) fail_undefined(obj);
    if (obj.is_object()) {
        if (auto v = obj.as_object().get_attr(name)) return *v;
        return missing(obj, Value::string(name));
    }
    if (auto method = builtin_method(obj, name)) return *method;
    if (auto v = python_getitem(obj, Value::string(name))) return *v;
    return missing(obj, Value::string(name));
}

Value get_item(const Value& obj, const Value& key) {
    if (obj.is_undefined()) fail_undefined(obj);
    if (auto v = python_getitem(obj, key)) return *v;
    if (key.is_string()) {
        if (obj.is_object()) {
            if (auto v = obj.as_object().get_attr(key.as_string())) return *v;
        } else if (auto method = builtin_method(obj, key.as_string())) {
            return *method;
        }
    }
    return missing(obj, key);
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
    charge_work(work_size(obj));
    if (obj.is_undefined()) fail_undefined(obj);
    const auto bound = [](const Value& v) -> std::optional<int64_t> {
        if (v.is_none()) return std::nullopt;
        if (v.is_int() || v.is_bool()) return v.as_int();
        throw EvalError("slice indices must be integers or None or have an __index__ method");
    };
    const std::optional<int64_t> b = bound(start), e = bound(stop), s = bound(step);
    const int64_t stride = s.value_or(1);
    if (stride == 0) throw EvalError("slice step cannot be zero");
    if (!obj.is_list() && !obj.is_string())
        throw EvalError(concat("'", obj.type_name(), "' object is not subscriptable"));

    std::vector<char32_t> cps;
    if (obj.is_string()) cps = unicode::decode(obj.as_string());
    const int64_t n = obj.is_string() ? static_cast<int64_t>(cps.size())
                                      : static_cast<int64_t>(obj.items().size());
    // Python's PySlice_AdjustIndices.
    const auto adjust = [&](std::optional<int64_t> v, int64_t dflt) {
        if (!v) return dflt;
        int64_t x = *v;
        if (x < 0) {
            x += n;
            if (x < 0) x = stride < 0 ? -1 : 0;
        } else if (x >= n) {
            x = stride < 0 ? n - 1 : n;
        }
        return x;
    };
    const int64_t first = adjust(b, stride < 0 ? n - 1 : 0);
    const int64_t last = adjust(e, stride < 0 ? -1 : n);
    std::vector<int64_t> indices;
    for (int64_t i = first; stride > 0 ? i < last : i > last; i += stride) indices.push_back(i);

    if (obj.is_string()) {
        std::string out;
        for (int64_t i : indices) unicode::append_utf8(out, cps[static_cast<std::size_t>(i)]);
        return Value::string(std::move(out), obj.is_markup());
    }
    std::vector<Value> out;
    out.reserve(indices.size());
    for (int64_t i : indices) out.push_back(obj.items()[static_cast<std::size_t>(i)]);
    return Value::list(std::move(out), obj.is_tuple());
}

std::string html_escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '\'':
                out += "&#39;";
                break;
            case '"':
                out += "&#34;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

}  // namespace minfer::jinja
