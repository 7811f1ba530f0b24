// Global functions: jinja2's range, dict, namespace, cycler and joiner, and Hugging Face's
// raise_exception and strftime_now.

#include <cstdio>
#include <ctime>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_interpreter.h"
#include "jinja/jinja_ops.h"
#include "jinja/py_format.h"

namespace minfer::jinja {

namespace {

// jinja2's sandbox refuses larger ranges (MAX_RANGE).
constexpr int64_t kMaxRange = 100000;

int64_t int_param(const Value& v) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    throw EvalError(concat("'", v.type_name(), "' object cannot be interpreted as an integer"));
}

Value g_range(Interpreter& interp, CallArgs& args) {
    if (!args.keyword.empty()) throw EvalError("range() takes no keyword arguments");
    const auto& p = args.positional;
    if (p.empty() || p.size() > 3)
        throw EvalError(concat("range expected 1 to 3 arguments, got ", p.size()));
    int64_t start = 0, stop = 0, step = 1;
    if (p.size() == 1) {
        stop = int_param(p[0]);
    } else {
        start = int_param(p[0]);
        stop = int_param(p[1]);
        if (p.size() == 3) step = int_param(p[2]);
    }
    if (step == 0) throw EvalError("range() arg 3 must not be zero");
    // The number of items, computed in unsigned arithmetic so that no subtraction overflows.
    uint64_t count = 0;
    if (step > 0 && stop > start) {
        const uint64_t span = static_cast<uint64_t>(stop) - static_cast<uint64_t>(start);
        count = (span - 1) / static_cast<uint64_t>(step) + 1;
    } else if (step < 0 && stop < start) {
        const uint64_t span = static_cast<uint64_t>(start) - static_cast<uint64_t>(stop);
        const uint64_t stride = static_cast<uint64_t>(-(step + 1)) + 1;
        count = (span - 1) / stride + 1;
    }
    if (count > kMaxRange)
        throw EvalError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    interp.budget().charge(count * kWorkUnitsPerItem);
    std::vector<Value> items;
    items.reserve(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < static_cast<int64_t>(count); ++i)
        items.push_back(Value::integer(start + i * step));
    return Value::list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs)
Dict make_dict(const CallArgs& args, const char* function) {
    if (args.positional.size() > 1)
        throw EvalError(concat(function, " expected at most 1 argument"));
    const bool from_dict = !args.positional.empty() && args.positional.front().is_dict();
    // Copy-constructed, not assigned: GCC 12 for aarch64 warns (wrongly) of a null dereference
    // in the assignment's shared_ptr release.
    Dict d = from_dict ? args.positional.front().as_dict() : Dict();
    if (!args.positional.empty() && !from_dict) {
        for (const Value& pair : iterate(args.positional.front())) {
            const std::vector<Value> kv = iterate(pair);
            if (kv.size() != 2)
                throw EvalError(concat("dictionary update sequence element has length ",
                                       kv.size(), "; 2 is required"));
            d.set(kv[0], kv[1]);
        }
    }
    for (const auto& [name, value] : args.keyword) d.set(Value::string(name), value);
    return d;
}

Value g_dict(Interpreter&, CallArgs& args) {
    return Value::dict(make_dict(args, "dict"));
}

Value g_namespace(Interpreter&, CallArgs& args) {
    auto ns = std::make_shared<Namespace>();
    const Dict attrs = make_dict(args, "namespace");
    for (const auto& [key, value] : attrs.entries()) ns->set_attr(py_str(key), value);
    return Value::object(ns);
}

Value g_raise_exception(Interpreter&, CallArgs& args) {
    const auto b = bind_args("raise_exception", args, {"message"});
    throw RaisedError(b[0] ? py_str(*b[0]) : std::string());
}

// Python's datetime.strftime differs from C's on a naive datetime (what Hugging Face's
// datetime.now() is): %f is the microseconds, %z and %Z are empty.
std::string python_strftime_directives(const std::string& format, int64_t micros) {
    std::string out;
    for (std::size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 >= format.size()) {
            out += format[i];
            continue;
        }
        const char d = format[++i];
        if (d == 'f') {
            char buf[16];
            std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(micros));
            out += buf;
        } else if (d != 'z' && d != 'Z') {
            out += '%';
            out += d;
        }
    }
    return out;
}

Value g_strftime_now(Interpreter& interp, CallArgs& args) {
    const auto b = bind_args("strftime_now", args, {"format"});
    if (!b[0] || !b[0]->is_string()) throw EvalError("strftime_now() needs a format string");
    std::tm tm{};
    const auto now = interp.options().now.value_or(std::chrono::system_clock::now());
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    if (interp.options().now)
        gmtime_r(&t, &tm);
    else
        localtime_r(&t, &tm);
    int64_t micros =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000;
    if (micros < 0) micros += 1000000;
    const std::string format = python_strftime_directives(b[0]->as_string(), micros);
    if (format.empty()) return Value::string("");
    // strftime returns 0 both for "too small" and for an empty result; grow a few times.
    for (std::size_t size = 256; size <= (std::size_t{1} << 20); size *= 4) {
        if (size < format.size() * 4 && size < (std::size_t{1} << 20)) continue;
        std::string buf(size, '\0');
        const std::size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
        if (n > 0) return Value::string(buf.substr(0, n));
    }
    return Value::string("");
}

class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
  public:
    explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
    std::string type_name() const override { return "Cycler"; }
    std::optional<Value> get_attr(std::string_view name) const override {
        auto self = std::const_pointer_cast<Cycler>(shared_from_this());
        if (name == "current") return items_.empty() ? Value::none() : items_[pos_];
        if (name == "next")
            return make_function("next", [self](Interpreter&, CallArgs& args) {
                bind_args("next", args, {});
                if (self->items_.empty()) throw EvalError("cycler has no items");
                Value v = self->items_[self->pos_];
                self->pos_ = (self->pos_ + 1) % self->items_.size();
                return v;
            });
        if (name == "reset")
            return make_function("reset", [self](Interpreter&, CallArgs&) {
                self->pos_ = 0;
                return Value::none();
            });
        return std::nullopt;
    }
    void visit_children(const std::function<void(const Value&)>& visit) const override {
        for (const Value& v : items_) visit(v);
    }

  private:
    std::vector<Value> items_;
    std::size_t pos_ = 0;
};

Value g_cycler(Interpreter&, CallArgs& args) {
    if (!args.keyword.empty()) throw EvalError("cycler() takes no keyword arguments");
    return Value::object(std::make_shared<Cycler>(args.positional));
}

Value g_joiner(Interpreter&, CallArgs& args) {
    const auto b = bind_args("joiner", args, {"sep"});
    const std::string sep = b[0] ? py_str(*b[0]) : std::string(", ");
    auto used = std::make_shared<bool>(false);
    return make_function("joiner", [sep, used](Interpreter&, CallArgs& call_args) {
        bind_args("joiner", call_args, {});
        if (!*used) {
            *used = true;
            return Value::string("");
        }
        return Value::string(sep);
    });
}

}  // namespace

std::optional<Value> builtin_global(std::string_view name) {
    using Fn = Value (*)(Interpreter&, CallArgs&);
    static const std::pair<std::string_view, Fn> kGlobals[] = {
        {"range", g_range},
        {"dict", g_dict},
        {"namespace", g_namespace},
        {"raise_exception", g_raise_exception},
        {"strftime_now", g_strftime_now},
        {"cycler", g_cycler},
        {"joiner", g_joiner},
    };
    for (const auto& [global_name, fn] : kGlobals)
        if (global_name == name) return make_function(std::string(name), fn);
    return std::nullopt;
}

}  // namespace minfer::jinja
