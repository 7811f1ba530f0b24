#include "jinja/jinja_interpreter.h"

#include <unordered_set>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_lexer.h"
#include "jinja/py_format.h"

namespace minfer::jinja {

namespace {

// Errors already tied to a template position pass through outer expressions unchanged.
class PositionedError : public TemplateError {
  public:
    using TemplateError::TemplateError;
};

// A macro: its definition and the scope it was defined in (weak, so that a macro stored in its
// own scope does not keep the scope alive; a dead scope falls back to the template's).
class Macro : public Object {
  public:
    Macro(const Stmt& def, std::weak_ptr<Frame> closure)
        : def_(def), closure_(std::move(closure)) {}
    std::string type_name() const override { return "Macro"; }
    std::string repr() const override {
        return concat("<Macro '", def_.name.empty() ? "caller" : def_.name, "'>");
    }
    bool is_callable() const override { return true; }
    std::optional<Value> get_attr(std::string_view name) const override {
        if (name == "name") return Value::string(def_.name.empty() ? "caller" : def_.name);
        return std::nullopt;
    }
    Value call(Interpreter& interp, CallArgs& args) override {
        return interp.invoke_macro(def_, closure_.lock(), args);
    }

  private:
    const Stmt& def_;
    std::weak_ptr<Frame> closure_;
};

// jinja2's LoopContext.
class LoopObject : public Object, public std::enable_shared_from_this<LoopObject> {
  public:
    LoopObject(std::vector<Value> items, int depth, const Stmt* recursive_loop,
               std::weak_ptr<Frame> frame)
        : items_(std::move(items)),
          depth_(depth),
          recursive_loop_(recursive_loop),
          frame_(std::move(frame)) {}

    void set_index(std::size_t i) { index_ = i; }
    std::string type_name() const override { return "LoopContext"; }
    std::string repr() const override {
        return concat("<LoopContext ", index_ + 1, "/", items_.size(), ">");
    }
    bool is_callable() const override { return recursive_loop_ != nullptr; }

    Value call(Interpreter& interp, CallArgs& args) override {
        if (recursive_loop_ == nullptr) return Object::call(interp, args);
        const auto b = bind_args("loop", args, {"iterable"});
        if (!b[0]) throw EvalError("loop() takes exactly one argument");
        auto frame = frame_.lock();
        if (!frame) throw EvalError("the loop's scope has ended");
        return Value::string(interp.run_loop(*recursive_loop_, *b[0], frame, depth_ + 1));
    }

    std::optional<Value> get_attr(std::string_view name) const override {
        const auto n = static_cast<int64_t>(items_.size());
        const auto i = static_cast<int64_t>(index_);
        if (name == "index") return Value::integer(i + 1);
        if (name == "index0") return Value::integer(i);
        if (name == "revindex") return Value::integer(n - i);
        if (name == "revindex0") return Value::integer(n - i - 1);
        if (name == "first") return Value::boolean(i == 0);
        if (name == "last") return Value::boolean(i == n - 1);
        if (name == "length") return Value::integer(n);
        if (name == "depth") return Value::integer(depth_ + 1);
        if (name == "depth0") return Value::integer(depth_);
        if (name == "previtem") {
            if (i == 0) return Value::undefined("there is no previous item");
            return items_[index_ - 1];
        }
        if (name == "nextitem") {
            if (i + 1 >= n) return Value::undefined("there is no next item");
            return items_[index_ + 1];
        }
        if (name == "cycle") {
            const std::size_t index = index_;
            return make_function("cycle", [index](Interpreter&, CallArgs& args) {
                if (args.positional.empty()) throw EvalError("no items for cycling given");
                return args.positional[index % args.positional.size()];
            });
        }
        if (name == "changed") {
            auto self = std::const_pointer_cast<LoopObject>(shared_from_this());
            return make_function("changed", [self](Interpreter&, CallArgs& args) {
                Value current = Value::list(args.positional);
                if (self->last_changed_ && equals(*self->last_changed_, current))
                    return Value::boolean(false);
                self->last_changed_ = std::move(current);
                return Value::boolean(true);
            });
        }
        return std::nullopt;
    }

    void visit_children(const std::function<void(const Value&)>& visit) const override {
        for (const Value& v : items_) visit(v);
    }

  private:
    std::vector<Value> items_;
    std::size_t index_ = 0;
    int depth_;
    const Stmt* recursive_loop_;
    std::weak_ptr<Frame> frame_;
    std::optional<Value> last_changed_;
};

// True when `value` refers (transitively) to the object `target`.
bool refers_to(const Value& value, const void* target, std::unordered_set<const void*>& seen) {
    const void* id = value.identity();
    if (id == nullptr) return false;
    if (id == target) return true;
    if (!seen.insert(id).second) return false;
    if (value.is_list()) {
        for (const Value& v : value.items())
            if (refers_to(v, target, seen)) return true;
    } else if (value.is_dict()) {
        for (const auto& [k, v] : value.as_dict().entries())
            if (refers_to(v, target, seen)) return true;
    } else if (value.is_object()) {
        bool found = false;
        value.as_object().visit_children(
            [&](const Value& v) { found = found || refers_to(v, target, seen); });
        return found;
    }
    return false;
}

}  // namespace

Interpreter::Interpreter(const RenderOptions& options, const Dict& variables)
    : options_(options), budget_(options.limits.max_work_units), root_(std::make_shared<Frame>()) {
    for (const auto& [key, value] : variables.entries())
        if (key.is_string()) root_->vars[key.as_string()] = value;
}

void Interpreter::step() {
    if (++steps_ > options_.limits.max_steps)
        throw EvalError(
            concat("template exceeds the step limit (", options_.limits.max_steps, ")"));
}

std::string Interpreter::render(const Body& body) {
    WorkScope work(budget_);
    std::string out;
    exec_body(body, root_, out);
    return out;
}

void Interpreter::append_output(std::string& out, std::string_view text) {
    if (out.size() + text.size() > options_.limits.max_output_bytes)
        throw EvalError(
            concat("template output exceeds ", options_.limits.max_output_bytes, " bytes"));
    out += text;
}

Interpreter::Flow Interpreter::exec_body(const Body& body, const std::shared_ptr<Frame>& frame,
                                         std::string& out) {
    for (const auto& stmt : body) {
        const Flow flow = exec(*stmt, frame, out);
        if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Frame>& frame) {
    std::string out;
    exec_body(body, frame, out);
    return out;
}

Interpreter::Flow Interpreter::exec(const Stmt& stmt, const std::shared_ptr<Frame>& frame,
                                    std::string& out) {
    try {
        step();
        switch (stmt.kind) {
            case StmtKind::Text:
                append_output(out, stmt.text);
                break;
            case StmtKind::Output:
                append_output(out, py_str(eval(*stmt.expr, frame)));
                break;
            case StmtKind::If:
                for (const auto& [cond, body] : stmt.branches)
                    if (truthy(eval(*cond, frame))) return exec_body(body, frame, out);
                return exec_body(stmt.else_body, frame, out);
            case StmtKind::For:
                exec_for(stmt, frame, out);
                break;
            case StmtKind::Set:
                exec_set(stmt, frame);
                break;
            case StmtKind::SetBlock: {
                auto inner = std::make_shared<Frame>();
                inner->parent = frame;
                Value captured = Value::string(capture(stmt.body, inner));
                if (stmt.expr) captured = eval_filter(*stmt.expr, frame, &captured);
                assign(*stmt.target, captured, frame);
                break;
            }
            case StmtKind::Macro:
                frame->vars[stmt.name] = Value::object(std::make_shared<Macro>(stmt, frame));
                break;
            case StmtKind::CallBlock:
                exec_call_block(stmt, frame, out);
                break;
            case StmtKind::FilterBlock: {
                auto inner = std::make_shared<Frame>();
                inner->parent = frame;
                const Value captured = Value::string(capture(stmt.body, inner));
                append_output(out, py_str(eval_filter(*stmt.expr, frame, &captured)));
                break;
            }
            case StmtKind::With: {
                auto inner = std::make_shared<Frame>();
                inner->parent = frame;
                for (const auto& [target, value] : stmt.assignments)
                    assign(*target, eval(*value, frame), inner);
                return exec_body(stmt.body, inner, out);
            }
            case StmtKind::Scope: {
                auto inner = std::make_shared<Frame>();
                inner->parent = frame;
                exec_body(stmt.body, inner, out);
                break;
            }
            case StmtKind::Break:
                return Flow::Break;
            case StmtKind::Continue:
                return Flow::Continue;
        }
    } catch (const PositionedError&) {
        throw;
    } catch (const RaisedError& e) {
        throw PositionedError(position_message(stmt.pos, e.what()));
    } catch (const EvalError& e) {
        throw PositionedError(position_message(stmt.pos, e.what()));
    }
    return Flow::Normal;
}

void Interpreter::exec_for(const Stmt& stmt, const std::shared_ptr<Frame>& frame,
                           std::string& out) {
    append_output(out, run_loop(stmt, eval(*stmt.expr, frame), frame, 0));
}

std::string Interpreter::run_loop(const Stmt& loop, const Value& iterable,
                                  const std::shared_ptr<Frame>& frame, int depth) {
    if (depth > options_.limits.max_call_depth) throw EvalError("recursive loop nested too deeply");
    std::vector<Value> items = iterate(iterable);
    if (loop.condition) {  // {% for x in xs if cond %}: filtered before loop.length is known
        std::vector<Value> kept;
        for (Value& item : items) {
            step();
            auto probe = std::make_shared<Frame>();
            probe->parent = frame;
            assign(*loop.target, item, probe);
            if (truthy(eval(*loop.condition, probe))) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    std::string out;
    if (items.empty()) {
        exec_body(loop.else_body, frame, out);
        return out;
    }
    auto loop_object =
        std::make_shared<LoopObject>(items, depth, loop.recursive ? &loop : nullptr, frame);
    const Value loop_value = Value::object(loop_object);
    for (std::size_t i = 0; i < items.size(); ++i) {
        step();
        loop_object->set_index(i);
        // A fresh scope per iteration: assignments in the body do not survive to the next one.
        auto inner = std::make_shared<Frame>();
        inner->parent = frame;
        inner->vars["loop"] = loop_value;
        assign(*loop.target, items[i], inner);
        const Flow flow = exec_body(loop.body, inner, out);
        if (flow == Flow::Break) break;
    }
    return out;
}

void Interpreter::exec_set(const Stmt& stmt, const std::shared_ptr<Frame>& frame) {
    assign(*stmt.target, eval(*stmt.expr, frame), frame);
}

void Interpreter::assign(const Expr& target, const Value& value,
                         const std::shared_ptr<Frame>& frame) {
    switch (target.kind) {
        case ExprKind::Name:
            frame->vars[target.name] = value;
            return;
        case ExprKind::Tuple: {
            const std::vector<Value> items = iterate(value);
            const std::size_t want = target.children.size();
            if (items.size() > want)
                throw EvalError(concat("too many values to unpack (expected ", want, ")"));
            if (items.size() < want)
                throw EvalError(concat("not enough values to unpack (expected ", want, ", got ",
                                       items.size(), ")"));
            for (std::size_t i = 0; i < want; ++i) assign(*target.children[i], items[i], frame);
            return;
        }
        case ExprKind::GetAttr: {
            const Value ns = lookup(target.children.front()->name, frame);
            auto* space = ns.is_object() ? dynamic_cast<Namespace*>(&ns.as_object()) : nullptr;
            if (space == nullptr) throw EvalError("can only set attributes on namespace objects");
            std::unordered_set<const void*> seen;
            if (refers_to(value, space, seen))
                throw EvalError("cannot store a namespace inside itself");
            space->set_attr(target.name, value);
            return;
        }
        default:
            throw EvalError("can't assign to this expression");
    }
}

void Interpreter::exec_call_block(const Stmt& stmt, const std::shared_ptr<Frame>& frame,
                                  std::string& out) {
    const Expr& call = *stmt.expr;
    const Value callee = eval(*call.children.front(), frame);
    CallArgs args = eval_args(call, 1, frame);
    const Value caller = Value::object(std::make_shared<Macro>(stmt, frame));
    // Only macros receive the block as `caller` (jinja2 passes it as a keyword argument).
    if (callee.is_object() && dynamic_cast<Macro*>(&callee.as_object()) != nullptr)
        args.keyword.emplace_back("caller", caller);
    append_output(out, py_str(this->call(callee, args)));
}

Value Interpreter::invoke_macro(const Stmt& def, const std::shared_ptr<Frame>& closure,
                                CallArgs& args) {
    if (call_depth_ >= options_.limits.max_call_depth)
        throw EvalError(concat("macro calls nested deeper than ", options_.limits.max_call_depth));
    struct DepthGuard {
        int& depth;
        explicit DepthGuard(int& d) : depth(++d) {}
        ~DepthGuard() { --depth; }
        DepthGuard(const DepthGuard&) = delete;
        DepthGuard& operator=(const DepthGuard&) = delete;
    } guard(call_depth_);

    auto frame = std::make_shared<Frame>();
    frame->parent = closure ? closure : root_;
    const std::string name = def.name.empty() ? "caller" : def.name;
    const std::size_t n = def.params.size();
    if (args.positional.size() > n && !def.uses_varargs)
        throw EvalError(concat("macro '", name, "' takes not more than ", n, " argument(s)"));
    std::vector<bool> given(n, false);
    for (std::size_t i = 0; i < std::min(n, args.positional.size()); ++i) {
        frame->vars[def.params[i]] = args.positional[i];
        given[i] = true;
    }
    Dict extra_kwargs;
    for (auto& [key, value] : args.keyword) {
        std::size_t i = 0;
        while (i < n && def.params[i] != key) ++i;
        if (i < n) {
            if (given[i])
                throw EvalError(
                    concat("macro '", name, "' got multiple values for argument '", key, "'"));
            frame->vars[key] = value;
            given[i] = true;
        } else if (key == "caller" && def.uses_caller) {
            frame->vars["caller"] = value;
        } else if (def.uses_kwargs) {
            extra_kwargs.set(Value::string(key), value);
        } else {
            throw EvalError(concat("macro '", name, "' takes no keyword argument '", key, "'"));
        }
    }
    const std::size_t first_default = n - def.defaults.size();
    for (std::size_t i = 0; i < n; ++i) {
        if (given[i]) continue;
        // Defaults are evaluated at call time in the macro's scope (earlier parameters visible).
        frame->vars[def.params[i]] =
            i >= first_default
                ? eval(*def.defaults[i - first_default], frame)
                : Value::undefined(concat("parameter '", def.params[i], "' was not provided"));
    }
    if (def.uses_varargs) {
        std::vector<Value> rest;
        for (std::size_t i = n; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
        frame->vars["varargs"] = Value::list(std::move(rest), true);
    }
    if (def.uses_kwargs) frame->vars["kwargs"] = Value::dict(std::move(extra_kwargs));
    if (def.uses_caller && !frame->vars.count("caller"))
        frame->vars["caller"] = Value::undefined("No caller defined");
    std::string out;
    exec_body(def.body, frame, out);
    return Value::string(std::move(out));
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
    if (callee.is_undefined()) fail_undefined(callee);
    if (!callee.is_object() || !callee.as_object().is_callable())
        throw EvalError(concat("'", callee.type_name(), "' object is not callable"));
    return callee.as_object().call(*this, args);
}

Value Interpreter::apply_filter(const std::string& name, const Value& input, CallArgs& args) {
    const FilterFn fn = find_filter(name);
    if (fn == nullptr) throw EvalError(concat("No filter named '", name, "'."));
    charge_work(work_size(input));  // filters read their whole input
    return fn(*this, input, args);
}

bool Interpreter::apply_test(const std::string& name, const Value& input, CallArgs& args) {
    const TestFn fn = find_test(name);
    if (fn == nullptr) throw EvalError(concat("No test named '", name, "'."));
    charge_work(work_size(input));
    return fn(*this, input, args);
}

Value Interpreter::lookup(const std::string& name, const std::shared_ptr<Frame>& frame) const {
    for (const Frame* f = frame.get(); f != nullptr; f = f->parent.get()) {
        const auto it = f->vars.find(name);
        if (it != f->vars.end()) return it->second;
    }
    if (auto global = builtin_global(name)) return *global;
    return Value::undefined(concat("'", name, "' is undefined"));
}

CallArgs Interpreter::eval_args(const Expr& expr, std::size_t first,
                                const std::shared_ptr<Frame>& frame) {
    CallArgs args;
    for (std::size_t i = first; i < expr.children.size(); ++i)
        args.positional.push_back(eval(*expr.children[i], frame));
    for (const auto& [key, value] : expr.kwargs)
        args.keyword.emplace_back(key, eval(*value, frame));
    return args;
}

Value Interpreter::eval_filter(const Expr& expr, const std::shared_ptr<Frame>& frame,
                               const Value* input) {
    // A chain a|f|g is nested Filter nodes; the innermost has a null input in filter blocks.
    const Expr* inner = expr.children.front().get();
    const Value subject = inner == nullptr ? *input
                          : inner->kind == ExprKind::Filter && input != nullptr
                              ? eval_filter(*inner, frame, input)
                              : eval(*inner, frame);
    CallArgs args = eval_args(expr, 1, frame);
    return apply_filter(expr.name, subject, args);
}

Value Interpreter::eval(const Expr& expr, const std::shared_ptr<Frame>& frame) {
    try {
        step();
        return eval_inner(expr, frame);
    } catch (const PositionedError&) {
        throw;
    } catch (const RaisedError&) {
        throw;  // positioned by the statement, message kept as the template wrote it
    } catch (const EvalError& e) {
        throw PositionedError(position_message(expr.pos, e.what()));
    }
}

Value Interpreter::eval_inner(const Expr& expr, const std::shared_ptr<Frame>& frame) {
    const auto child = [&](std::size_t i) { return eval(*expr.children[i], frame); };
    switch (expr.kind) {
        case ExprKind::Literal:
            return expr.literal;
        case ExprKind::Name:
            return lookup(expr.name, frame);
        case ExprKind::List:
        case ExprKind::Tuple: {
            std::vector<Value> items;
            items.reserve(expr.children.size());
            for (std::size_t i = 0; i < expr.children.size(); ++i) items.push_back(child(i));
            budget_.charge(items.size());
            return Value::list(std::move(items), expr.kind == ExprKind::Tuple);
        }
        case ExprKind::Dict: {
            Dict d;
            for (std::size_t i = 0; i + 1 < expr.children.size(); i += 2)
                d.set(child(i), child(i + 1));
            budget_.charge(d.size());
            return Value::dict(std::move(d));
        }
        case ExprKind::GetAttr:
            return get_attr(child(0), expr.name);
        case ExprKind::GetItem:
            return get_item(child(0), child(1));
        case ExprKind::Slice: {
            const Value obj = child(0);
            const auto part = [&](std::size_t i) {
                return expr.children[i] ? child(i) : Value::none();
            };
            return slice(obj, part(1), part(2), part(3));
        }
        case ExprKind::Call: {
            const Value callee = child(0);
            CallArgs args = eval_args(expr, 1, frame);
            return call(callee, args);
        }
        case ExprKind::Filter:
            return eval_filter(expr, frame, nullptr);
        case ExprKind::Test: {
            const Value subject = child(0);
            CallArgs args = eval_args(expr, 1, frame);
            const bool result = apply_test(expr.name, subject, args);
            return Value::boolean(result != expr.negated);
        }
        case ExprKind::Not:
            return Value::boolean(!truthy(child(0)));
        case ExprKind::Negate:
            return negate(child(0));
        case ExprKind::Plus: {
            const Value v = child(0);
            if (v.is_undefined()) fail_undefined(v);
            if (!v.is_number())
                throw EvalError(concat("bad operand type for unary +: '", v.type_name(), "'"));
            return v.is_bool() ? Value::integer(v.as_int()) : v;
        }
        case ExprKind::Binary:
            return binary(expr.binary_op, child(0), child(1), budget_);
        case ExprKind::Concat: {
            std::string out;
            for (std::size_t i = 0; i < expr.children.size(); ++i) {
                out += py_str(child(i));
                if (out.size() > options_.limits.max_output_bytes)
                    throw EvalError("string too large");
            }
            budget_.charge(out.size());
            return Value::string(std::move(out));
        }
        case ExprKind::Compare: {
            Value left = child(0);
            for (std::size_t i = 0; i < expr.compare_ops.size(); ++i) {
                Value right = child(i + 1);
                if (!compare(expr.compare_ops[i], left, right)) return Value::boolean(false);
                left = std::move(right);
            }
            return Value::boolean(true);
        }
        case ExprKind::And: {
            Value left = child(0);
            return truthy(left) ? child(1) : left;
        }
        case ExprKind::Or: {
            Value left = child(0);
            return truthy(left) ? left : child(1);
        }
        case ExprKind::Conditional:
            if (truthy(child(0))) return child(1);
            if (expr.children[2]) return child(2);
            return Value::undefined(
                "the inline if-expression evaluated to false and no else section was defined");
    }
    return Value();
}

}  // namespace minfer::jinja
