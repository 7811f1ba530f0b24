#pragma once
// Python's operators and protocols on template values: truth, equality, ordering, arithmetic,
// `in`, iteration, len(), and jinja2's attribute/item lookup (environment.getattr/getitem).

#include <cstdint>
#include <string>
#include <vector>

#include "jinja/jinja_value.h"

namespace minfer::jinja {

// Bounds the work of one render: bytes of strings and items of lists that it creates, decodes,
// copies or searches. A hostile template can thus neither exhaust memory with repeated
// concatenation or `*` nor spend hours on large strings within its step limit.
class Budget {
  public:
    explicit Budget(uint64_t max_units) : left_(max_units) {}
    // Spends `units` (bytes of string or items of list); throws EvalError when spent.
    void charge(uint64_t units);

  private:
    uint64_t left_;
};

// Work accounting: operations whose cost grows with their operands (decoding, copying or
// searching strings and lists) charge that size to the budget of the render running on this
// thread, so that a template cannot loop over expensive operations for hours within its step
// limit. Outside a render (a WorkScope) nothing is charged.
void charge_work(uint64_t units);
// What one item of a list or dict counts against the work budget, in bytes of string: copying,
// comparing or printing an item (a Value) costs about what 64 bytes do (bench_chat's
// render_hostile: list filters in a loop took 80 s of CPU to spend the budget when an item
// counted as a byte, as long as string work takes at 64).
inline constexpr uint64_t kWorkUnitsPerItem = 64;
// Size of a value for work accounting: bytes of a string, kWorkUnitsPerItem per item of a list or
// dict, else 1.
uint64_t work_size(const Value& v);

class WorkScope {
  public:
    explicit WorkScope(Budget& budget);
    ~WorkScope();
    WorkScope(const WorkScope&) = delete;
    WorkScope& operator=(const WorkScope&) = delete;

  private:
    Budget* previous_;
};

enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

bool truthy(const Value& v);
bool equals(const Value& a, const Value& b);
// a < b (Python ordering); throws EvalError for unordered types.
bool less_than(const Value& a, const Value& b);
bool compare(CompareOp op, const Value& a, const Value& b);
Value binary(BinaryOp op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v);
// `item in container`
bool contains(const Value& container, const Value& item);

// iter(v) materialised: str -> characters, dict -> keys, undefined -> nothing.
std::vector<Value> iterate(const Value& v);
// len(v); throws EvalError when it has none.
int64_t length(const Value& v);
// Throws the UndefinedError of an undefined value (its hint).
[[noreturn]] void fail_undefined(const Value& v);

// `obj.name` (attribute first, then item) and `obj[key]` (item first, then attribute), as
// jinja2's sandboxed environment does. Missing: an undefined value with Python's message.
Value get_attr(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound may be undefined/None (absent).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// "'dict object'" as jinja2 names a value's type in messages.
std::string object_type_repr(const Value& v);
// Escapes &, <, >, ' and " as markupsafe does.
std::string html_escape(const std::string& s);

}  // namespace minfer::jinja
