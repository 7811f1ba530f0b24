// jinja2's builtin filters (and Hugging Face's tojson), with Python's semantics. Filters that
// jinja2 implements as generators (map, select, unique, ...) return an IteratorObject.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_set>

#include "jinja/jinja_builtins.h"
#include "jinja/jinja_interpreter.h"
#include "jinja/jinja_ops.h"
#include "jinja/py_format.h"
#include "jinja/py_string_format.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {

namespace {

using Bound = std::vector<std::optional<Value>>;

const Value& arg_or(const Bound& b, std::size_t i, const Value& fallback) {
    return b[i] ? *b[i] : fallback;
}

// soft_str: strings stay as they are (Markup included), anything else goes through str().
Value soft_str(const Value& v) {
    return v.is_string() ? v : Value::string(py_str(v));
}

int64_t int_arg(const Value& v, std::string_view what) {
    if (v.is_int() || v.is_bool()) return v.as_int();
    throw EvalError(concat(what, " must be an integer, not ", v.type_name()));
}

Value generator(std::vector<Value> items) {
    return Value::object(std::make_shared<IteratorObject>(std::move(items), "generator"));
}

// A string key lower-cased for case-insensitive comparison (jinja2's ignore_case).
Value ignore_case(const Value& v) {
    return v.is_string() ? Value::string(unicode::to_lower(v.as_string())) : v;
}

// jinja2's make_attrgetter: "a.b.0" looks up each part with getitem (digits as integers).
Value get_attribute_path(const Value& item, const Value& attribute) {
    if (!attribute.is_string()) return get_item(item, attribute);
    Value current = item;
    const std::string& path = attribute.as_string();
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = path.find('.', start);
        const std::string part =
            path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
        const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
            return c >= '0' && c <= '9';
        });
        if (digits && part.size() < 18)
            current = get_item(current, Value::integer(std::stoll(part)));
        else
            current = get_item(current, Value::string(part));
        if (dot == std::string::npos) break;
        start = dot + 1;
    }
    return current;
}

std::vector<Value> sorted_values(std::vector<Value> items, bool reverse, bool case_sensitive,
                                 const std::optional<Value>& attribute) {
    // A sort compares about n log2 n times; the filter call charged n items already.
    charge_work(items.size() * kWorkUnitsPerItem * std::bit_width(items.size()));
    std::vector<std::pair<Value, Value>> keyed;
    keyed.reserve(items.size());
    for (Value& item : items) {
        Value key = attribute ? get_attribute_path(item, *attribute) : item;
        if (!case_sensitive) key = ignore_case(key);
        keyed.emplace_back(std::move(key), std::move(item));
    }
    std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        return reverse ? less_than(b.first, a.first) : less_than(a.first, b.first);
    });
    std::vector<Value> out;
    out.reserve(keyed.size());
    for (auto& [key, item] : keyed) out.push_back(std::move(item));
    return out;
}

Value f_tojson(Interpreter& interp, const Value& v, CallArgs& args) {
    const Bound b =
        bind_args("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
    JsonOptions options;
    options.ensure_ascii = truthy(arg_or(b, 0, Value::boolean(false)));
    const Value indent = arg_or(b, 1, Value::none());
    if (indent.is_string()) {
        options.indent = indent.as_string();
    } else if (indent.is_int() || indent.is_bool()) {
        options.indent = std::string(
            static_cast<std::size_t>(std::clamp<int64_t>(indent.as_int(), 0, 1000)), ' ');
    } else if (!indent.is_none()) {
        throw EvalError(
            concat("tojson indent must be an integer or string, not ", indent.type_name()));
    }
    if (options.indent) options.item_separator = ",";
    const Value separators = arg_or(b, 2, Value::none());
    if (!separators.is_none()) {
        if (!separators.is_list() || separators.items().size() != 2 ||
            !separators.items()[0].is_string() || !separators.items()[1].is_string())
            throw EvalError("tojson separators must be a pair of strings");
        options.item_separator = separators.items()[0].as_string();
        options.key_separator = separators.items()[1].as_string();
    }
    options.sort_keys = truthy(arg_or(b, 3, Value::boolean(false)));
    std::string out = json_dumps(v, options);
    interp.budget().charge(out.size());
    return Value::string(std::move(out));
}

Value f_trim(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("trim", args, {"chars"});
    const Value s = soft_str(v);
    std::optional<std::string> chars;
    if (b[0] && !b[0]->is_none()) chars = soft_str(*b[0]).as_string();
    return Value::string(unicode::strip(s.as_string(), chars ? &*chars : nullptr, true, true),
                         s.is_markup());
}

Value f_upper(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("upper", args, {});
    return Value::string(unicode::to_upper(soft_str(v).as_string()), v.is_markup());
}

Value f_lower(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("lower", args, {});
    return Value::string(unicode::to_lower(soft_str(v).as_string()), v.is_markup());
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("capitalize", args, {});
    return Value::string(unicode::capitalize(soft_str(v).as_string()), v.is_markup());
}

// jinja2's title: words start after runs of '-', whitespace, '(', '{', '[' or '<'.
Value f_title(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("title", args, {});
    const std::vector<char32_t> cps = unicode::decode(soft_str(v).as_string());
    std::string out;
    bool word_start = true;
    for (char32_t cp : cps) {
        const bool separator =
            cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || unicode::is_space(cp);
        std::string ch;
        unicode::append_utf8(ch, cp);
        if (separator) {
            out += ch;
            word_start = true;
        } else {
            out += word_start ? unicode::to_upper(ch) : unicode::to_lower(ch);
            word_start = false;
        }
    }
    return Value::string(std::move(out), v.is_markup());
}

Value f_length(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("length", args, {});
    return Value::integer(length(v));
}

Value f_join(Interpreter& interp, const Value& v, CallArgs& args) {
    const Bound b = bind_args("join", args, {"d", "attribute"});
    const std::string sep = py_str(arg_or(b, 0, Value::string("")));
    std::string out;
    bool first = true;
    for (const Value& item : iterate(v)) {
        if (!first) out += sep;
        first = false;
        out += py_str(b[1] && !b[1]->is_none() ? get_attribute_path(item, *b[1]) : item);
        if (out.size() > interp.options().limits.max_output_bytes)
            throw EvalError("join result exceeds the output limit");
    }
    interp.budget().charge(out.size());
    return Value::string(std::move(out));
}

Value f_default(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("default", args, {"default_value", "boolean"});
    const bool boolean = truthy(arg_or(b, 1, Value::boolean(false)));
    if (v.is_undefined() || (boolean && !truthy(v))) return arg_or(b, 0, Value::string(""));
    return v;
}

Value f_first(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("first", args, {});
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No first item, sequence was empty.");
    return items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("last", args, {});
    if (v.is_object()) throw EvalError(concat("'", v.type_name(), "' object is not reversible"));
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No last item, sequence was empty.");
    return items.back();
}

Value f_list(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("list", args, {});
    return Value::list(iterate(v));
}

Value f_items(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("items", args, {});
    if (v.is_undefined()) return generator({});
    if (!v.is_dict()) throw EvalError("Can only get item pairs from a mapping.");
    std::vector<Value> pairs;
    for (const auto& [key, value] : v.as_dict().entries())
        pairs.push_back(Value::list({key, value}, true));
    return generator(std::move(pairs));
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("dictsort", args, {"case_sensitive", "by", "reverse"});
    if (!v.is_dict())
        throw EvalError(concat("'", v.type_name(), "' object has no attribute 'items'"));
    const bool case_sensitive = truthy(arg_or(b, 0, Value::boolean(false)));
    const std::string by = py_str(arg_or(b, 1, Value::string("key")));
    if (by != "key" && by != "value")
        throw EvalError("You can only sort by either \"key\" or \"value\"");
    const bool reverse = truthy(arg_or(b, 2, Value::boolean(false)));
    std::vector<Value> pairs;
    for (const auto& [key, value] : v.as_dict().entries())
        pairs.push_back(Value::list({key, value}, true));
    return Value::list(sorted_values(std::move(pairs), reverse, case_sensitive,
                                     Value::integer(by == "key" ? 0 : 1)));
}

// select/reject/selectattr/rejectattr share this: keep items whose (attribute's) test passes.
Value select_or_reject(Interpreter& interp, const Value& v, CallArgs& args, bool lookup_attr,
                       bool keep) {
    std::vector<Value> rest = args.positional;
    std::optional<Value> attribute;
    if (lookup_attr) {
        if (rest.empty()) throw EvalError("Missing parameter for attribute name");
        attribute = rest.front();
        rest.erase(rest.begin());
    }
    std::optional<std::string> test;
    if (!rest.empty()) {
        test = py_str(rest.front());
        rest.erase(rest.begin());
    }
    std::vector<Value> out;
    if (!truthy(v)) return generator({});  // jinja2 iterates only a truthy value
    for (const Value& item : iterate(v)) {
        const Value subject = attribute ? get_attribute_path(item, *attribute) : item;
        bool passed;
        if (test) {
            CallArgs test_args{rest, args.keyword};
            passed = interp.apply_test(*test, subject, test_args);
        } else {
            passed = truthy(subject);
        }
        if (passed == keep) out.push_back(item);
    }
    return generator(std::move(out));
}

Value f_select(Interpreter& i, const Value& v, CallArgs& a) {
    return select_or_reject(i, v, a, false, true);
}
Value f_reject(Interpreter& i, const Value& v, CallArgs& a) {
    return select_or_reject(i, v, a, false, false);
}
Value f_selectattr(Interpreter& i, const Value& v, CallArgs& a) {
    return select_or_reject(i, v, a, true, true);
}
Value f_rejectattr(Interpreter& i, const Value& v, CallArgs& a) {
    return select_or_reject(i, v, a, true, false);
}

Value f_map(Interpreter& interp, const Value& v, CallArgs& args) {
    std::vector<Value> out;
    if (!truthy(v)) return generator({});  // jinja2 iterates only a truthy value
    if (args.positional.empty()) {
        std::optional<Value> attribute, fallback;
        for (const auto& [name, value] : args.keyword) {
            if (name == "attribute")
                attribute = value;
            else if (name == "default")
                fallback = value;
            else
                throw EvalError(concat("Unexpected keyword argument '", name, "'"));
        }
        if (!attribute) throw EvalError("map requires a filter name or attribute=");
        for (const Value& item : iterate(v)) {
            Value got = get_attribute_path(item, *attribute);
            if (got.is_undefined() && fallback) got = *fallback;
            out.push_back(std::move(got));
        }
        return generator(std::move(out));
    }
    const std::string filter = py_str(args.positional.front());
    for (const Value& item : iterate(v)) {
        CallArgs filter_args{std::vector<Value>(args.positional.begin() + 1, args.positional.end()),
                             args.keyword};
        out.push_back(interp.apply_filter(filter, item, filter_args));
    }
    return generator(std::move(out));
}

Value f_unique(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("unique", args, {"case_sensitive", "attribute"});
    const bool case_sensitive = truthy(arg_or(b, 0, Value::boolean(false)));
    std::unordered_set<std::string> seen;
    std::vector<Value> out;
    for (const Value& item : iterate(v)) {
        Value key = b[1] && !b[1]->is_none() ? get_attribute_path(item, *b[1]) : item;
        if (!case_sensitive) key = ignore_case(key);
        const auto h = hash_key(key);
        if (!h) throw EvalError(concat("unhashable type: '", key.type_name(), "'"));
        if (seen.insert(*h).second) out.push_back(item);
    }
    return generator(std::move(out));
}

Value f_replace(Interpreter& interp, const Value& v, CallArgs& args) {
    const Bound b = bind_args("replace", args, {"old", "new", "count"});
    if (!b[0] || !b[1]) throw EvalError("replace() missing required argument");
    CallArgs method_args;
    method_args.positional = {soft_str(*b[0]), soft_str(*b[1])};
    if (b[2] && !b[2]->is_none()) method_args.positional.push_back(*b[2]);
    const Value s = soft_str(v);
    return interp.call(get_attr(s, "replace"), method_args);
}

Value f_string(Interpreter& interp, const Value& v, CallArgs& args) {
    bind_args("string", args, {});
    Value out = soft_str(v);
    interp.budget().charge(out.as_string().size());
    return out;
}

std::optional<int64_t> parse_python_int(std::string text, int base) {
    text = unicode::strip(text, nullptr, true, true);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (text.empty() || base < 0 || base == 1 || base > 36) return std::nullopt;
    errno = 0;
    char* end = nullptr;
    const long long r = std::strtoll(text.c_str(), &end, base);
    if (errno != 0 || end != text.c_str() + text.size()) return std::nullopt;
    return r;
}

std::optional<double> parse_python_float(const std::string& raw) {
    std::string text = unicode::strip(raw, nullptr, true, true);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    if (text.empty() || text.find_first_of("xXpP") != std::string::npos) return std::nullopt;
    char* end = nullptr;
    const double r = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return std::nullopt;
    return r;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("int", args, {"default", "base"});
    const Value fallback = arg_or(b, 0, Value::integer(0));
    const int base = static_cast<int>(int_arg(arg_or(b, 1, Value::integer(10)), "base"));
    if (v.is_int() || v.is_bool()) return Value::integer(v.as_int());
    if (v.is_float()) {
        if (!std::isfinite(v.as_float()) || std::fabs(v.as_float()) >= 9.2e18) return fallback;
        return Value::integer(static_cast<int64_t>(v.as_float()));
    }
    if (v.is_string()) {
        if (auto i = parse_python_int(v.as_string(), base)) return Value::integer(*i);
        if (auto f = parse_python_float(v.as_string());
            f && std::isfinite(*f) && std::fabs(*f) < 9.2e18)
            return Value::integer(static_cast<int64_t>(*f));
    }
    return fallback;
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("float", args, {"default"});
    if (v.is_number()) return Value::number(v.as_float());
    if (v.is_string())
        if (auto f = parse_python_float(v.as_string())) return Value::number(*f);
    return arg_or(b, 0, Value::number(0.0));
}

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("abs", args, {});
    if (v.is_int() || v.is_bool()) {
        if (v.as_int() == INT64_MIN) throw EvalError("integer overflow");
        return Value::integer(std::llabs(v.as_int()));
    }
    if (v.is_float()) return Value::number(std::fabs(v.as_float()));
    throw EvalError(concat("bad operand type for abs(): '", v.type_name(), "'"));
}

// Python's round(x, ndigits): correctly rounded, ties to even on the exact binary value.
double python_round(double x, int64_t digits) {
    if (!std::isfinite(x)) return x;
    if (digits >= 0) {
        if (digits > 300) return x;
        char buf[512];
        std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 340)), x);
        return std::strtod(buf, nullptr);
    }
    if (digits < -308) return 0.0 * x;
    const double scale = std::pow(10.0, static_cast<double>(-digits));
    return std::nearbyint(x / scale) * scale;
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("round", args, {"precision", "method"});
    const int64_t precision = int_arg(arg_or(b, 0, Value::integer(0)), "precision");
    const std::string method = py_str(arg_or(b, 1, Value::string("common")));
    if (!v.is_number())
        throw EvalError(concat("type ", v.type_name(), " doesn't define __round__ method"));
    if (method == "common") {
        if (v.is_float()) return Value::number(python_round(v.as_float(), precision));
        if (precision >= 0) return Value::integer(v.as_int());
        return Value::integer(static_cast<int64_t>(python_round(v.as_float(), precision)));
    }
    if (method != "ceil" && method != "floor")
        throw EvalError("method must be common, ceil or floor");
    const double scale =
        std::pow(10.0, static_cast<double>(std::clamp<int64_t>(precision, -308, 308)));
    const double x = v.as_float() * scale;
    return Value::number((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("safe", args, {});
    return Value::string(py_str(v), true);
}

Value f_escape(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("escape", args, {});
    if (v.is_markup()) return v;
    return Value::string(html_escape(py_str(v)), true);
}

Value f_indent(Interpreter& interp, const Value& v, CallArgs& args) {
    const Bound b = bind_args("indent", args, {"width", "first", "blank"});
    const Value width = arg_or(b, 0, Value::integer(4));
    std::string indentation;
    if (width.is_string()) {
        indentation = width.as_string();
    } else {
        const int64_t n = int_arg(width, "width");
        indentation = std::string(static_cast<std::size_t>(std::clamp<int64_t>(n, 0, 10000)), ' ');
    }
    const bool first = truthy(arg_or(b, 1, Value::boolean(false)));
    const bool blank = truthy(arg_or(b, 2, Value::boolean(false)));
    const std::vector<std::string> lines = unicode::split_lines(soft_str(v).as_string() + "\n");
    std::string out;
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (i > 0) {
            out += '\n';
            if (blank || !lines[i].empty()) out += indentation;
        }
        out += lines[i];
    }
    if (first) out = indentation + out;
    interp.budget().charge(out.size());
    return Value::string(std::move(out), v.is_markup());
}

Value f_sum(Interpreter& interp, const Value& v, CallArgs& args) {
    const Bound b = bind_args("sum", args, {"attribute", "start"});
    Value total = arg_or(b, 1, Value::integer(0));
    for (const Value& item : iterate(v))
        total = binary(BinaryOp::Add, total,
                       b[0] && !b[0]->is_none() ? get_attribute_path(item, *b[0]) : item,
                       interp.budget());
    return total;
}

Value min_max(const Value& v, CallArgs& args, bool want_max) {
    const Bound b = bind_args(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
    const bool case_sensitive = truthy(arg_or(b, 0, Value::boolean(false)));
    const std::vector<Value> items = iterate(v);
    if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
    const auto key = [&](const Value& item) {
        Value k = b[1] && !b[1]->is_none() ? get_attribute_path(item, *b[1]) : item;
        return case_sensitive ? k : ignore_case(k);
    };
    std::size_t best = 0;
    Value best_key = key(items[0]);
    for (std::size_t i = 1; i < items.size(); ++i) {
        Value k = key(items[i]);
        if (want_max ? less_than(best_key, k) : less_than(k, best_key)) {
            best = i;
            best_key = std::move(k);
        }
    }
    return items[best];
}

Value f_min(Interpreter&, const Value& v, CallArgs& args) {
    return min_max(v, args, false);
}
Value f_max(Interpreter&, const Value& v, CallArgs& args) {
    return min_max(v, args, true);
}

Value f_sort(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("sort", args, {"reverse", "case_sensitive", "attribute"});
    std::optional<Value> attribute;
    if (b[2] && !b[2]->is_none()) attribute = *b[2];
    return Value::list(sorted_values(iterate(v), truthy(arg_or(b, 0, Value::boolean(false))),
                                     truthy(arg_or(b, 1, Value::boolean(false))), attribute));
}

Value f_reverse(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("reverse", args, {});
    if (v.is_string()) {
        std::vector<char32_t> cps = unicode::decode(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value::string(unicode::encode(cps), v.is_markup());
    }
    std::vector<Value> items = iterate(v);
    std::reverse(items.begin(), items.end());
    if (v.is_list())
        return Value::object(std::make_shared<IteratorObject>(
            std::move(items), v.is_tuple() ? "reversed" : "list_reverseiterator"));
    if (v.is_dict())
        return Value::object(
            std::make_shared<IteratorObject>(std::move(items), "dict_reversekeyiterator"));
    return Value::list(std::move(items));
}

Value f_batch(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("batch", args, {"linecount", "fill_with"});
    if (!b[0]) throw EvalError("batch() missing required argument 'linecount'");
    const int64_t count = int_arg(*b[0], "linecount");
    if (count <= 0) throw EvalError("batch linecount must be positive");
    std::vector<Value> batches, current;
    for (const Value& item : iterate(v)) {
        current.push_back(item);
        if (static_cast<int64_t>(current.size()) == count)
            batches.push_back(Value::list(std::exchange(current, {})));
    }
    if (!current.empty()) {
        if (b[1] && !b[1]->is_none())
            while (static_cast<int64_t>(current.size()) < count) current.push_back(*b[1]);
        batches.push_back(Value::list(std::move(current)));
    }
    return generator(std::move(batches));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
    bind_args("wordcount", args, {});
    int64_t words = 0;
    bool in_word = false;
    for (char32_t cp : unicode::decode(soft_str(v).as_string())) {
        const bool w = unicode::is_word_char(cp);
        if (w && !in_word) ++words;
        in_word = w;
    }
    return Value::integer(words);
}

Value f_center(Interpreter& interp, const Value& v, CallArgs& args) {
    const Bound b = bind_args("center", args, {"width"});
    const int64_t width =
        std::min<int64_t>(int_arg(arg_or(b, 0, Value::integer(80)), "width"), 1 << 20);
    const std::string s = soft_str(v).as_string();
    const auto n = static_cast<int64_t>(unicode::length(s));
    if (width <= n) return Value::string(s);
    const int64_t margin = width - n;
    const int64_t left = margin / 2 + (margin & width & 1);
    interp.budget().charge(static_cast<uint64_t>(width));
    return Value::string(std::string(static_cast<std::size_t>(left), ' ') + s +
                         std::string(static_cast<std::size_t>(margin - left), ' '));
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
    if (!args.positional.empty() && !args.keyword.empty())
        throw EvalError("can't handle positional and keyword arguments at the same time");
    if (!args.keyword.empty()) {
        Dict mapping;
        for (const auto& [name, value] : args.keyword) mapping.set(Value::string(name), value);
        return Value::string(
            percent_format(soft_str(v).as_string(), Value::dict(std::move(mapping))));
    }
    return Value::string(
        percent_format(soft_str(v).as_string(), Value::list(args.positional, true)));
}

Value f_attr(Interpreter&, const Value& v, CallArgs& args) {
    const Bound b = bind_args("attr", args, {"name"});
    if (!b[0]) throw EvalError("attr() missing required argument 'name'");
    return get_attr(v, py_str(*b[0]));
}

struct NamedFilter {
    std::string_view name;
    FilterFn fn;
};

constexpr NamedFilter kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"first", f_first},
    {"float", f_float},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"sort", f_sort},
    {"string", f_string},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"unique", f_unique},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
    for (const auto& f : kFilters)
        if (f.name == name) return f.fn;
    return nullptr;
}

}  // namespace minfer::jinja
