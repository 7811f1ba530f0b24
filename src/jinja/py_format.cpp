#include "jinja/py_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/hex_escape.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {

namespace {

// Containers nest at most this deep when printed (deeper ones come only from hostile input).
constexpr int kMaxPrintDepth = 512;

void check_depth(int depth) {
    if (depth > kMaxPrintDepth)
        throw EvalError(concat("value nested deeper than ", kMaxPrintDepth, " levels"));
}

void repr_into(std::string& out, const Value& v, int depth);

void repr_sequence(std::string& out, const Value& v, int depth) {
    const bool tuple = v.is_tuple();
    out += tuple ? '(' : '[';
    const auto& items = v.items();
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        repr_into(out, items[i], depth + 1);
    }
    if (tuple && items.size() == 1) out += ',';
    out += tuple ? ')' : ']';
}

void repr_into(std::string& out, const Value& v, int depth) {
    check_depth(depth);
    switch (v.kind()) {
        case Kind::Undefined:
            out += "Undefined";
            return;
        case Kind::String:
            out += string_repr(v.as_string());
            return;
        case Kind::List:
            repr_sequence(out, v, depth);
            return;
        case Kind::Dict: {
            out += '{';
            bool first = true;
            for (const auto& [key, value] : v.as_dict().entries()) {
                if (!first) out += ", ";
                first = false;
                repr_into(out, key, depth + 1);
                out += ": ";
                repr_into(out, value, depth + 1);
            }
            out += '}';
            return;
        }
        default:
            out += py_str(v);
            return;
    }
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
    out += '"';
    for (char32_t cp : unicode::decode(s)) {
        switch (cp) {
            case '"':
                out += "\\\"";
                continue;
            case '\\':
                out += "\\\\";
                continue;
            case '\n':
                out += "\\n";
                continue;
            case '\r':
                out += "\\r";
                continue;
            case '\t':
                out += "\\t";
                continue;
            case '\b':
                out += "\\b";
                continue;
            case '\f':
                out += "\\f";
                continue;
            default:
                break;
        }
        if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
            if (cp >= 0x10000) {
                const char32_t u = cp - 0x10000;
                out += "\\u";
                append_hex(out, 0xD800 + (u >> 10), 4);
                out += "\\u";
                append_hex(out, 0xDC00 + (u & 0x3FF), 4);
            } else {
                out += "\\u";
                append_hex(out, cp, 4);
            }
        } else {
            unicode::append_utf8(out, cp);
        }
    }
    out += '"';
}

std::string json_float(double f) {
    if (std::isnan(f)) return "NaN";
    if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
    return float_repr(f);
}

// A dict key as json.dumps converts it.
std::string json_key(const Value& key) {
    switch (key.kind()) {
        case Kind::String:
            return key.as_string();
        case Kind::Bool:
            return key.as_bool() ? "true" : "false";
        case Kind::Int:
            return std::to_string(key.as_int());
        case Kind::Float:
            return json_float(key.as_float());
        case Kind::None:
            return "null";
        default:
            throw EvalError(
                concat("keys must be str, int, float, bool or None, not ", key.type_name()));
    }
}

struct JsonWriter {
    const JsonOptions& options;
    std::string out;

    void newline(int level) {
        out += '\n';
        for (int i = 0; i < level; ++i) out += *options.indent;
    }

    void write(const Value& v, int depth) {
        check_depth(depth);
        switch (v.kind()) {
            case Kind::None:
                out += "null";
                return;
            case Kind::Bool:
                out += v.as_bool() ? "true" : "false";
                return;
            case Kind::Int:
                out += std::to_string(v.as_int());
                return;
            case Kind::Float:
                out += json_float(v.as_float());
                return;
            case Kind::String:
                json_string(out, v.as_string(), options.ensure_ascii);
                return;
            case Kind::List:
                write_list(v.items(), depth);
                return;
            case Kind::Dict:
                write_dict(v.as_dict(), depth);
                return;
            default:
                throw EvalError(
                    concat("Object of type ", v.type_name(), " is not JSON serializable"));
        }
    }

    void write_list(const std::vector<Value>& items, int depth) {
        if (items.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        for (std::size_t i = 0; i < items.size(); ++i) {
            if (i) out += options.item_separator;
            if (options.indent) newline(depth + 1);
            write(items[i], depth + 1);
        }
        if (options.indent) newline(depth);
        out += ']';
    }

    void write_dict(const Dict& dict, int depth) {
        if (dict.empty()) {
            out += "{}";
            return;
        }
        std::vector<std::pair<std::string, const Value*>> entries;
        entries.reserve(dict.size());
        for (const auto& [key, value] : dict.entries()) entries.emplace_back(json_key(key), &value);
        if (options.sort_keys) {
            for (const auto& [key, value] : dict.entries())
                if (key.kind() != dict.entries().front().first.kind() &&
                    !(key.is_number() && dict.entries().front().first.is_number()))
                    throw EvalError("'<' not supported between dict keys of different types");
            std::stable_sort(entries.begin(), entries.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
        }
        out += '{';
        for (std::size_t i = 0; i < entries.size(); ++i) {
            if (i) out += options.item_separator;
            if (options.indent) newline(depth + 1);
            json_string(out, entries[i].first, options.ensure_ascii);
            out += options.key_separator;
            write(*entries[i].second, depth + 1);
        }
        if (options.indent) newline(depth);
        out += '}';
    }
};

}  // namespace

std::string float_repr(double f) {
    if (std::isnan(f)) return "nan";
    if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
    const std::string sci(buf, res.ptr);  // "-1.2345e+02"
    const std::size_t e = sci.find('e');
    std::string mantissa = sci.substr(0, e);
    const int exponent = std::stoi(sci.substr(e + 1));
    std::string sign;
    if (!mantissa.empty() && mantissa[0] == '-') {
        sign = "-";
        mantissa.erase(0, 1);
    }
    std::string digits;
    for (char c : mantissa)
        if (c != '.') digits += c;
    if (exponent >= -4 && exponent < 16) {
        std::string out;
        if (exponent < 0) {
            out = concat("0.", std::string(static_cast<std::size_t>(-exponent - 1), '0'), digits);
        } else if (static_cast<std::size_t>(exponent) + 1 >= digits.size()) {
            out = digits + std::string(exponent + 1 - digits.size(), '0') + ".0";
        } else {
            out = digits.substr(0, exponent + 1) + "." + digits.substr(exponent + 1);
        }
        return sign + out;
    }
    std::string out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + out + exp_buf;
}

std::string string_repr(const std::string& s) {
    const bool has_single = s.find('\'') != std::string::npos;
    const bool has_double = s.find('"') != std::string::npos;
    const char quote = has_single && !has_double ? '"' : '\'';
    std::string out(1, quote);
    for (char32_t cp : unicode::decode(s)) {
        if (cp == static_cast<char32_t>(quote) || cp == '\\') {
            out += '\\';
            out += static_cast<char>(cp);
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (unicode::is_printable(cp)) {
            unicode::append_utf8(out, cp);
        } else if (cp <= 0xFF) {
            out += "\\x";
            append_hex(out, cp, 2);
        } else if (cp <= 0xFFFF) {
            out += "\\u";
            append_hex(out, cp, 4);
        } else {
            out += "\\U";
            append_hex(out, cp, 8);
        }
    }
    out += quote;
    return out;
}

std::string py_repr(const Value& v) {
    std::string out;
    repr_into(out, v, 0);
    return out;
}

std::string py_str(const Value& v) {
    switch (v.kind()) {
        case Kind::Undefined:
            return "";
        case Kind::None:
            return "None";
        case Kind::Bool:
            return v.as_bool() ? "True" : "False";
        case Kind::Int:
            return std::to_string(v.as_int());
        case Kind::Float:
            return float_repr(v.as_float());
        case Kind::String:
            return v.as_string();
        case Kind::List:
        case Kind::Dict:
            return py_repr(v);
        case Kind::Object:
            return v.as_object().repr();
    }
    return "";
}

std::string json_dumps(const Value& v, const JsonOptions& options) {
    JsonWriter writer{options, {}};
    writer.write(v, 0);
    return std::move(writer.out);
}

}  // namespace minfer::jinja
