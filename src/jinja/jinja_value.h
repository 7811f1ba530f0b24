#pragma once
// The values a Jinja template computes with, modelled on the Python objects jinja2 uses:
// undefined, None, bool, int, float, str (optionally "Markup"), list/tuple, dict (insertion
// ordered, keys of any hashable kind) and objects (namespace, loop, macros, generators, ...).
// Containers are immutable once built (Hugging Face renders in an immutable sandbox), so values
// share them through shared_ptr and copying a Value is cheap.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace minfer::jinja {

// A failure while evaluating (Python's TypeError, UndefinedError, ...), not yet tied to a
// template position; the interpreter turns it into a TemplateError with line and column.
class EvalError : public Error {
  public:
    using Error::Error;
};

class Value;
class Object;
class Dict;
class Interpreter;

struct List {
    std::vector<Value> items;
    bool is_tuple = false;
};

// Positional and keyword arguments of a call, as evaluated.
struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keyword;
};

enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

class Value {
  public:
    Value() = default;  // undefined, without a hint

    // `hint` says why it is undefined ("'x' is undefined"); used when it is misused.
    static Value undefined(std::string hint);
    static Value none();
    static Value boolean(bool b);
    static Value integer(int64_t i);
    static Value number(double f);
    static Value string(std::string s, bool markup = false);
    static Value list(std::vector<Value> items, bool tuple = false);
    static Value dict(Dict d);
    static Value object(std::shared_ptr<Object> o);

    Kind kind() const { return kind_; }
    bool is_undefined() const { return kind_ == Kind::Undefined; }
    bool is_none() const { return kind_ == Kind::None; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_int() const { return kind_ == Kind::Int; }
    bool is_float() const { return kind_ == Kind::Float; }
    // int, float or bool (Python's numbers.Number)
    bool is_number() const {
        return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool;
    }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_markup() const { return kind_ == Kind::String && markup_; }
    bool is_list() const { return kind_ == Kind::List; }  // list or tuple
    bool is_tuple() const { return kind_ == Kind::List && list_->is_tuple; }
    bool is_dict() const { return kind_ == Kind::Dict; }
    bool is_object() const { return kind_ == Kind::Object; }

    bool as_bool() const { return int_ != 0; }
    int64_t as_int() const { return int_; }                 // Int or Bool
    double as_float() const;                                // Int, Bool or Float
    const std::string& as_string() const { return *str_; }  // String; Undefined: its hint
    const std::vector<Value>& items() const { return list_->items; }
    const Dict& as_dict() const { return *dict_; }
    Object& as_object() const { return *obj_; }
    const std::shared_ptr<Object>& object_ptr() const { return obj_; }
    const void* identity() const;  // container/object address, for cycle checks
    const std::string& undefined_hint() const;

    // Python's type name: 'str', 'int', 'list', 'dict', 'NoneType', 'Undefined', ...
    std::string type_name() const;

  private:
    Kind kind_ = Kind::Undefined;
    bool markup_ = false;
    int64_t int_ = 0;
    double float_ = 0;
    std::shared_ptr<const std::string> str_;
    std::shared_ptr<const List> list_;
    std::shared_ptr<const Dict> dict_;
    std::shared_ptr<Object> obj_;
};

// An insertion-ordered dict. Keys are hashable values (None, bool, int, float, str, tuple);
// like Python, 1, 1.0 and True are the same key.
class Dict {
  public:
    const Value* find(const Value& key) const;
    const Value* find(std::string_view key) const;
    void set(const Value& key, Value value);  // throws EvalError for an unhashable key
    std::size_t size() const { return entries_.size(); }
    bool empty() const { return entries_.empty(); }
    const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }

  private:
    std::vector<std::pair<Value, Value>> entries_;
    std::unordered_map<std::string, std::size_t> index_;
};

// The hashing identity of a key (nullopt when unhashable, e.g. a list).
std::optional<std::string> hash_key(const Value& key);

// Anything that is not plain data: namespaces, loop contexts, macros, builtin functions,
// bound methods, generators.
class Object {
  public:
    virtual ~Object() = default;
    virtual std::string type_name() const = 0;
    virtual std::string repr() const;
    // The attribute, or nullopt when it has none.
    virtual std::optional<Value> get_attr(std::string_view name) const;
    virtual bool is_callable() const { return false; }
    virtual Value call(Interpreter& interp, CallArgs& args);
    // Values it refers to (for cycle detection before a namespace assignment).
    virtual void visit_children(const std::function<void(const Value&)>& visit) const;
};

// A builtin function or bound method.
class Function : public Object {
  public:
    using Body = std::function<Value(Interpreter&, CallArgs&)>;
    Function(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr() const override { return concat("<built-in function ", name_, ">"); }
    bool is_callable() const override { return true; }
    Value call(Interpreter& interp, CallArgs& args) override { return body_(interp, args); }

  private:
    std::string name_;
    Body body_;
};
Value make_function(std::string name, Function::Body body);

// jinja2's namespace(): the one mutable object, whose attributes `set ns.x = ...` assigns.
class Namespace : public Object {
  public:
    std::string type_name() const override { return "Namespace"; }
    std::string repr() const override;
    std::optional<Value> get_attr(std::string_view name) const override;
    void set_attr(const std::string& name, Value value) {
        attrs_.set(Value::string(name), std::move(value));
    }
    void visit_children(const std::function<void(const Value&)>& visit) const override;
    const Dict& attrs() const { return attrs_; }

  private:
    Dict attrs_;
};

// The result of a lazy Python iterator (select, map, reverse, ...): iterable once, truthy, with
// no length; tojson refuses it. `python_type` is e.g. "generator".
class IteratorObject : public Object {
  public:
    IteratorObject(std::vector<Value> items, std::string python_type)
        : items_(std::move(items)), python_type_(std::move(python_type)) {}
    std::string type_name() const override { return python_type_; }
    std::string repr() const override { return concat("<", python_type_, " object>"); }
    // The remaining items; the iterator is exhausted afterwards.
    std::vector<Value> take() { return std::exchange(items_, {}); }
    void visit_children(const std::function<void(const Value&)>& visit) const override;

  private:
    std::vector<Value> items_;
    std::string python_type_;
};

// Binds call arguments to parameter names by Python's rules (positional first, then keywords);
// a parameter not given is nullopt. Throws EvalError naming `function` on a bad call.
std::vector<std::optional<Value>> bind_args(std::string_view function, const CallArgs& args,
                                            const std::vector<std::string_view>& params);

}  // namespace minfer::jinja
