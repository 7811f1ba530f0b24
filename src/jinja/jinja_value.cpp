#include "jinja/jinja_value.h"

#include <cmath>

#include "jinja/py_format.h"

namespace minfer::jinja {

Value Value::undefined(std::string hint) {
    Value v;
    v.str_ = std::make_shared<const std::string>(std::move(hint));
    return v;
}

Value Value::none() {
    Value v;
    v.kind_ = Kind::None;
    return v;
}

Value Value::boolean(bool b) {
    Value v;
    v.kind_ = Kind::Bool;
    v.int_ = b ? 1 : 0;
    return v;
}

Value Value::integer(int64_t i) {
    Value v;
    v.kind_ = Kind::Int;
    v.int_ = i;
    return v;
}

Value Value::number(double f) {
    Value v;
    v.kind_ = Kind::Float;
    v.float_ = f;
    return v;
}

Value Value::string(std::string s, bool markup) {
    Value v;
    v.kind_ = Kind::String;
    v.markup_ = markup;
    v.str_ = std::make_shared<const std::string>(std::move(s));
    return v;
}

Value Value::list(std::vector<Value> items, bool tuple) {
    Value v;
    v.kind_ = Kind::List;
    v.list_ = std::make_shared<const List>(List{std::move(items), tuple});
    return v;
}

Value Value::dict(Dict d) {
    Value v;
    v.kind_ = Kind::Dict;
    v.dict_ = std::make_shared<const Dict>(std::move(d));
    return v;
}

Value Value::object(std::shared_ptr<Object> o) {
    Value v;
    v.kind_ = Kind::Object;
    v.obj_ = std::move(o);
    return v;
}

double Value::as_float() const {
    return kind_ == Kind::Float ? float_ : static_cast<double>(int_);
}

const void* Value::identity() const {
    switch (kind_) {
        case Kind::List:
            return list_.get();
        case Kind::Dict:
            return dict_.get();
        case Kind::Object:
            return obj_.get();
        default:
            return nullptr;
    }
}

const std::string& Value::undefined_hint() const {
    static const std::string empty;
    return str_ ? *str_ : empty;
}

std::string Value::type_name() const {
    switch (kind_) {
        case Kind::Undefined:
            return "Undefined";
        case Kind::None:
            return "NoneType";
        case Kind::Bool:
            return "bool";
        case Kind::Int:
            return "int";
        case Kind::Float:
            return "float";
        case Kind::String:
            return markup_ ? "Markup" : "str";
        case Kind::List:
            return list_->is_tuple ? "tuple" : "list";
        case Kind::Dict:
            return "dict";
        case Kind::Object:
            return obj_->type_name();
    }
    return "object";
}

std::optional<std::string> hash_key(const Value& key) {
    switch (key.kind()) {
        case Kind::Undefined:  // jinja2's Undefined is hashable (all alike)
            return std::string("U");
        case Kind::None:
            return std::string("N");
        case Kind::Bool:
        case Kind::Int:
            return concat("n", key.as_int());
        case Kind::Float: {
            const double f = key.as_float();
            if (std::isfinite(f) && f == std::trunc(f) && std::fabs(f) < 9.2e18)
                return concat("n", static_cast<int64_t>(f));
            return concat("f", float_repr(f));
        }
        case Kind::String:
            return concat("s", key.as_string());
        case Kind::List: {
            if (!key.is_tuple()) return std::nullopt;
            std::string out = "t(";
            for (const Value& item : key.items()) {
                auto h = hash_key(item);
                if (!h) return std::nullopt;
                out += std::to_string(h->size()) + ":" + *h;
            }
            return out + ")";
        }
        default:
            return std::nullopt;
    }
}

const Value* Dict::find(const Value& key) const {
    const auto h = hash_key(key);
    if (!h) return nullptr;
    const auto it = index_.find(*h);
    return it == index_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::find(std::string_view key) const {
    const auto it = index_.find(concat("s", key));
    return it == index_.end() ? nullptr : &entries_[it->second].second;
}

void Dict::set(const Value& key, Value value) {
    const auto h = hash_key(key);
    if (!h) throw EvalError(concat("unhashable type: '", key.type_name(), "'"));
    const auto [it, inserted] = index_.emplace(*h, entries_.size());
    if (inserted)
        entries_.emplace_back(key, std::move(value));
    else
        entries_[it->second].second = std::move(value);
}

std::string Object::repr() const {
    return concat("<", type_name(), " object>");
}

std::optional<Value> Object::get_attr(std::string_view) const {
    return std::nullopt;
}

Value Object::call(Interpreter&, CallArgs&) {
    throw EvalError(concat("'", type_name(), "' object is not callable"));
}

void Object::visit_children(const std::function<void(const Value&)>&) const {}

Value make_function(std::string name, Function::Body body) {
    return Value::object(std::make_shared<Function>(std::move(name), std::move(body)));
}

std::string Namespace::repr() const {
    return concat("<Namespace ", py_repr(Value::dict(attrs_)), ">");
}

std::optional<Value> Namespace::get_attr(std::string_view name) const {
    const Value* v = attrs_.find(name);
    if (v == nullptr) return std::nullopt;
    return *v;
}

void Namespace::visit_children(const std::function<void(const Value&)>& visit) const {
    for (const auto& [k, v] : attrs_.entries()) visit(v);
}

void IteratorObject::visit_children(const std::function<void(const Value&)>& visit) const {
    for (const Value& v : items_) visit(v);
}

std::vector<std::optional<Value>> bind_args(std::string_view function, const CallArgs& args,
                                            const std::vector<std::string_view>& params) {
    std::vector<std::optional<Value>> bound(params.size());
    if (args.positional.size() > params.size())
        throw EvalError(concat(function, "() takes at most ", params.size(), " argument(s) (",
                               args.positional.size(), " given)"));
    for (std::size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
    for (const auto& [name, value] : args.keyword) {
        std::size_t i = 0;
        while (i < params.size() && params[i] != name) ++i;
        if (i == params.size())
            throw EvalError(concat(function, "() got an unexpected keyword argument '", name, "'"));
        if (bound[i])
            throw EvalError(concat(function, "() got multiple values for argument '", name, "'"));
        bound[i] = value;
    }
    return bound;
}

}  // namespace minfer::jinja
