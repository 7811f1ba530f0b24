#include "jinja/jinja_methods.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "jinja/jinja_interpreter.h"
#include "jinja/jinja_ops.h"
#include "jinja/py_format.h"
#include "jinja/py_string_format.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {

namespace {

using Bound = std::vector<std::optional<Value>>;

const std::string& str_arg(const std::optional<Value>& v, std::string_view method) {
    if (!v || !v->is_string())
        throw EvalError(concat(method, "() argument must be str, not ",
                               v ? v->type_name() : std::string("nothing")));
    return v->as_string();
}

bool absent(const std::optional<Value>& v) {
    return !v || v->is_none();
}

// Code-point index of a byte offset.
int64_t char_index(const std::string& s, std::size_t byte_offset) {
    return static_cast<int64_t>(unicode::length(std::string_view(s).substr(0, byte_offset)));
}

// The byte range [begin, end) of code points [start, stop) with Python's index clamping.
std::pair<std::size_t, std::size_t> byte_range(const std::string& s,
                                               const std::optional<Value>& start,
                                               const std::optional<Value>& stop) {
    if (absent(start) && absent(stop)) return {0, s.size()};
    const std::vector<char32_t> cps = unicode::decode(s);
    const auto n = static_cast<int64_t>(cps.size());
    const auto clamp = [&](const std::optional<Value>& v, int64_t dflt) {
        if (absent(v)) return dflt;
        if (!v->is_int() && !v->is_bool())
            throw EvalError("slice indices must be integers or None");
        int64_t i = v->as_int();
        if (i < 0) i = std::max<int64_t>(i + n, 0);
        return std::min(i, n);
    };
    const int64_t b = clamp(start, 0), e = clamp(stop, n);
    const auto offset = [&](int64_t k) {
        std::string prefix;
        for (int64_t i = 0; i < k; ++i)
            unicode::append_utf8(prefix, cps[static_cast<std::size_t>(i)]);
        return prefix.size();
    };
    return {offset(b), std::max(offset(b), offset(e))};
}

Value split(const std::string& s, const Bound& b, bool from_right) {
    const int64_t maxsplit = absent(b[1]) ? -1 : b[1]->as_int();
    std::vector<Value> parts;
    if (absent(b[0])) {  // runs of whitespace, ends ignored
        std::vector<char32_t> cps = unicode::decode(s);
        if (from_right) std::reverse(cps.begin(), cps.end());
        std::size_t i = 0;
        int64_t splits = 0;
        while (true) {
            while (i < cps.size() && unicode::is_space(cps[i])) ++i;
            if (i >= cps.size()) break;
            std::size_t j = i;
            if (maxsplit >= 0 && splits >= maxsplit) {
                j = cps.size();  // the rest, its far end unstripped (as Python does)
            } else {
                while (j < cps.size() && !unicode::is_space(cps[j])) ++j;
            }
            std::vector<char32_t> word(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                       cps.begin() + static_cast<std::ptrdiff_t>(j));
            if (from_right) std::reverse(word.begin(), word.end());
            parts.push_back(Value::string(unicode::encode(word)));
            ++splits;
            i = j;
            if (j == cps.size() || (maxsplit >= 0 && splits > maxsplit)) break;
        }
        if (from_right) std::reverse(parts.begin(), parts.end());
        return Value::list(std::move(parts));
    }
    const std::string& sep = str_arg(b[0], from_right ? "rsplit" : "split");
    if (sep.empty()) throw EvalError("empty separator");
    if (!from_right) {
        std::size_t start = 0;
        int64_t splits = 0;
        while (maxsplit < 0 || splits < maxsplit) {
            const std::size_t at = s.find(sep, start);
            if (at == std::string::npos) break;
            parts.push_back(Value::string(s.substr(start, at - start)));
            start = at + sep.size();
            ++splits;
        }
        parts.push_back(Value::string(s.substr(start)));
        return Value::list(std::move(parts));
    }
    std::size_t end = s.size();
    int64_t splits = 0;
    while (maxsplit < 0 || splits < maxsplit) {
        if (end < sep.size()) break;
        const std::size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string::npos) break;
        parts.push_back(Value::string(s.substr(at + sep.size(), end - at - sep.size())));
        end = at;
        ++splits;
    }
    parts.push_back(Value::string(s.substr(0, end)));
    std::reverse(parts.begin(), parts.end());
    return Value::list(std::move(parts));
}

Value replace(Interpreter& interp, const std::string& s, const Bound& b) {
    const std::string& old_text = str_arg(b[0], "replace");
    const std::string& new_text = str_arg(b[1], "replace");
    int64_t count = absent(b[2]) ? -1 : b[2]->as_int();
    std::string out;
    if (old_text.empty()) {  // inserts between characters, at both ends
        const std::vector<char32_t> cps = unicode::decode(s);
        for (std::size_t i = 0; i <= cps.size(); ++i) {
            if (count != 0) {
                out += new_text;
                if (count > 0) --count;
            }
            if (i < cps.size()) unicode::append_utf8(out, cps[i]);
            if (out.size() > interp.options().limits.max_output_bytes)
                throw EvalError("replace result too large");
        }
    } else {
        std::size_t start = 0;
        while (count != 0) {
            const std::size_t at = s.find(old_text, start);
            if (at == std::string::npos) break;
            out.append(s, start, at - start);
            out += new_text;
            start = at + old_text.size();
            if (count > 0) --count;
            if (out.size() > interp.options().limits.max_output_bytes)
                throw EvalError("replace result too large");
        }
        out.append(s, start, std::string::npos);
    }
    interp.budget().charge(out.size());
    return Value::string(std::move(out));
}

bool affix_matches(const std::string& s, const Bound& b, bool prefix, std::string_view method) {
    const auto [begin, end] = byte_range(s, b[1], b[2]);
    const std::string_view region = std::string_view(s).substr(begin, end - begin);
    const auto test = [&](const Value& v) {
        if (!v.is_string())
            throw EvalError(
                concat(method, " first arg must be str or a tuple of str, not ", v.type_name()));
        const std::string& a = v.as_string();
        if (a.size() > region.size()) return false;
        return prefix ? region.substr(0, a.size()) == a
                      : region.substr(region.size() - a.size()) == a;
    };
    if (!b[0]) throw EvalError(concat(method, "() takes at least 1 argument (0 given)"));
    if (b[0]->is_tuple()) {
        for (const Value& v : b[0]->items())
            if (test(v)) return true;
        return false;
    }
    return test(*b[0]);
}

bool all_chars(const std::string& s, bool (*pred)(char32_t)) {
    const std::vector<char32_t> cps = unicode::decode(s);
    return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

bool is_digit_cp(char32_t c) {
    return c >= '0' && c <= '9';
}
bool is_alpha_cp(char32_t c) {
    return unicode::is_word_char(c) && !is_digit_cp(c) && c != '_';
}
bool is_alnum_cp(char32_t c) {
    return unicode::is_word_char(c) && c != '_';
}

Value pad(const std::string& s, const Bound& b, int align) {
    if (!b[0] || (!b[0]->is_int() && !b[0]->is_bool())) throw EvalError("width must be an integer");
    const int64_t width = std::min<int64_t>(b[0]->as_int(), 1 << 20);
    std::string fill = " ";
    if (b[1]) {
        fill = str_arg(b[1], "pad");
        if (unicode::length(fill) != 1)
            throw EvalError("The fill character must be exactly one character long");
    }
    const auto n = static_cast<int64_t>(unicode::length(s));
    if (width <= n) return Value::string(s);
    const int64_t margin = width - n;
    int64_t left = align < 0 ? 0 : align > 0 ? margin : margin / 2 + (margin & width & 1);
    std::string out;
    for (int64_t i = 0; i < left; ++i) out += fill;
    out += s;
    for (int64_t i = 0; i < margin - left; ++i) out += fill;
    return Value::string(std::move(out));
}

Value string_method(const Value& self, const std::string& name) {
    const std::string s = self.as_string();
    const auto method = [&](std::vector<std::string_view> params, auto body) {
        return make_function(name, [s, params, body, name](Interpreter& interp, CallArgs& args) {
            charge_work(s.size());  // string methods read the whole string
            return body(interp, bind_args(name, args, params));
        });
    };
    using I = Interpreter;
    if (name == "strip" || name == "lstrip" || name == "rstrip")
        return method({"chars"}, [s, name](I&, const Bound& b) {
            std::optional<std::string> chars;
            if (!absent(b[0])) chars = str_arg(b[0], name);
            return Value::string(
                unicode::strip(s, chars ? &*chars : nullptr, name != "rstrip", name != "lstrip"));
        });
    if (name == "split" || name == "rsplit")
        return method({"sep", "maxsplit"},
                      [s, name](I&, const Bound& b) { return split(s, b, name == "rsplit"); });
    if (name == "startswith" || name == "endswith")
        return method({"prefix", "start", "end"}, [s, name](I&, const Bound& b) {
            return Value::boolean(affix_matches(s, b, name == "startswith", name));
        });
    if (name == "upper")
        return method({}, [s](I&, const Bound&) { return Value::string(unicode::to_upper(s)); });
    if (name == "lower")
        return method({}, [s](I&, const Bound&) { return Value::string(unicode::to_lower(s)); });
    if (name == "title")
        return method({},
                      [s](I&, const Bound&) { return Value::string(unicode::python_title(s)); });
    if (name == "capitalize")
        return method({}, [s](I&, const Bound&) { return Value::string(unicode::capitalize(s)); });
    if (name == "replace")
        return method({"old", "new", "count"},
                      [s](I& interp, const Bound& b) { return replace(interp, s, b); });
    if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count")
        return method({"sub", "start", "end"}, [s, name](I&, const Bound& b) {
            const std::string& sub = str_arg(b[0], name);
            const auto [begin, end] = byte_range(s, b[1], b[2]);
            const std::string region = s.substr(begin, end - begin);
            if (name == "count") {
                if (sub.empty())
                    return Value::integer(static_cast<int64_t>(unicode::length(region)) + 1);
                int64_t n = 0;
                for (std::size_t at = region.find(sub); at != std::string::npos;
                     at = region.find(sub, at + sub.size()))
                    ++n;
                return Value::integer(n);
            }
            const std::size_t at = (name[0] == 'r') ? region.rfind(sub) : region.find(sub);
            if (at == std::string::npos) {
                if (name == "index" || name == "rindex") throw EvalError("substring not found");
                return Value::integer(-1);
            }
            return Value::integer(char_index(s, begin + at));
        });
    if (name == "format")
        return make_function(name, [s](I& interp, CallArgs& args) {
            charge_work(s.size());
            std::string out = python_str_format(s, args);
            interp.budget().charge(out.size());
            return Value::string(std::move(out));
        });
    if (name == "join")
        return method({"iterable"}, [s](I& interp, const Bound& b) {
            if (!b[0]) throw EvalError("join() takes exactly one argument (0 given)");
            std::string out;
            std::size_t i = 0;
            for (const Value& item : iterate(*b[0])) {
                if (!item.is_string())
                    throw EvalError(concat("sequence item ", i, ": expected str instance, ",
                                           item.type_name(), " found"));
                if (i++) out += s;
                out += item.as_string();
                if (out.size() > interp.options().limits.max_output_bytes)
                    throw EvalError("join result too large");
            }
            interp.budget().charge(out.size());
            return Value::string(std::move(out));
        });
    if (name == "splitlines")
        return method({}, [s](I&, const Bound&) {
            std::vector<Value> lines;
            for (auto& line : unicode::split_lines(s))
                lines.push_back(Value::string(std::move(line)));
            return Value::list(std::move(lines));
        });
    if (name == "isdigit")
        return method({},
                      [s](I&, const Bound&) { return Value::boolean(all_chars(s, is_digit_cp)); });
    if (name == "isalpha")
        return method({},
                      [s](I&, const Bound&) { return Value::boolean(all_chars(s, is_alpha_cp)); });
    if (name == "isalnum")
        return method({},
                      [s](I&, const Bound&) { return Value::boolean(all_chars(s, is_alnum_cp)); });
    if (name == "isspace")
        return method(
            {}, [s](I&, const Bound&) { return Value::boolean(all_chars(s, unicode::is_space)); });
    if (name == "islower" || name == "isupper")
        return method({}, [s, name](I&, const Bound&) {
            const bool lower = name == "islower";
            const std::string same = lower ? unicode::to_lower(s) : unicode::to_upper(s);
            const std::string other = lower ? unicode::to_upper(s) : unicode::to_lower(s);
            return Value::boolean(s == same && s != other);
        });
    if (name == "ljust")
        return method({"width", "fillchar"}, [s](I&, const Bound& b) { return pad(s, b, -1); });
    if (name == "rjust")
        return method({"width", "fillchar"}, [s](I&, const Bound& b) { return pad(s, b, 1); });
    if (name == "center")
        return method({"width", "fillchar"}, [s](I&, const Bound& b) { return pad(s, b, 0); });
    if (name == "removeprefix" || name == "removesuffix")
        return method({"affix"}, [s, name](I&, const Bound& b) {
            const std::string& a = str_arg(b[0], name);
            if (name == "removeprefix" && s.compare(0, a.size(), a) == 0)
                return Value::string(s.substr(a.size()));
            if (name == "removesuffix" && s.size() >= a.size() &&
                s.compare(s.size() - a.size(), a.size(), a) == 0)
                return Value::string(s.substr(0, s.size() - a.size()));
            return Value::string(s);
        });
    return Value();
}

Value dict_method(const Value& self, const std::string& name) {
    const auto method = [&](std::vector<std::string_view> params, auto body) {
        return make_function(name, [self, params, body, name](Interpreter&, CallArgs& args) {
            return body(bind_args(name, args, params));
        });
    };
    if (name == "items")
        return method({}, [self](const Bound&) {
            std::vector<Value> pairs;
            for (const auto& [k, v] : self.as_dict().entries())
                pairs.push_back(Value::list({k, v}, true));
            return Value::list(std::move(pairs));
        });
    if (name == "keys")
        return method({}, [self](const Bound&) { return Value::list(iterate(self)); });
    if (name == "values")
        return method({}, [self](const Bound&) {
            std::vector<Value> values;
            for (const auto& [k, v] : self.as_dict().entries()) values.push_back(v);
            return Value::list(std::move(values));
        });
    if (name == "get")
        return method({"key", "default"}, [self](const Bound& b) {
            if (!b[0]) throw EvalError("get expected at least 1 argument, got 0");
            if (!hash_key(*b[0]))
                throw EvalError(concat("unhashable type: '", b[0]->type_name(), "'"));
            const Value* v = self.as_dict().find(*b[0]);
            return v ? *v : (b[1] ? *b[1] : Value::none());
        });
    if (name == "copy")
        return method({}, [self](const Bound&) { return Value::dict(self.as_dict()); });
    return Value();
}

Value list_method(const Value& self, const std::string& name) {
    if (name == "index" || name == "count")
        return make_function(name, [self, name](Interpreter&, CallArgs& args) {
            const Bound b = bind_args(name, args, {"value"});
            if (!b[0]) throw EvalError(concat(name, "() takes exactly one argument (0 given)"));
            int64_t n = 0;
            for (std::size_t i = 0; i < self.items().size(); ++i) {
                if (!equals(self.items()[i], *b[0])) continue;
                if (name == "index") return Value::integer(static_cast<int64_t>(i));
                ++n;
            }
            if (name == "index") throw EvalError(concat(py_repr(*b[0]), " is not in list"));
            return Value::integer(n);
        });
    return Value();
}

bool is_mutating(const Value& obj, const std::string& name) {
    static const char* const list_mutators[] = {"append", "extend", "insert", "pop",
                                                "remove", "clear",  "sort",   "reverse"};
    static const char* const dict_mutators[] = {"pop", "popitem", "setdefault", "update", "clear"};
    if (obj.is_list() && !obj.is_tuple())
        return std::any_of(std::begin(list_mutators), std::end(list_mutators),
                           [&](const char* m) { return name == m; });
    if (obj.is_dict())
        return std::any_of(std::begin(dict_mutators), std::end(dict_mutators),
                           [&](const char* m) { return name == m; });
    return false;
}

}  // namespace

std::optional<Value> builtin_method(const Value& obj, const std::string& name) {
    Value m;
    if (obj.is_string())
        m = string_method(obj, name);
    else if (obj.is_dict())
        m = dict_method(obj, name);
    else if (obj.is_list())
        m = list_method(obj, name);
    if (!m.is_undefined()) return m;
    if (is_mutating(obj, name))
        return Value::undefined(concat("access to attribute '", name, "' of '", obj.type_name(),
                                       "' object is unsafe."));
    return std::nullopt;
}

}  // namespace minfer::jinja
