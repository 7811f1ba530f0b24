#include "jinja/py_string_format.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "jinja/jinja_ops.h"
#include "jinja/py_format.h"
#include "jinja/unicode_text.h"

namespace minfer::jinja {

namespace {

// Applies "%-10.3s"-style width and precision (in code points) to a %s/%r conversion.
std::string pad_text(const std::string& text, const std::string& spec) {
    const bool left = spec.find('-') != std::string::npos;
    std::size_t width = 0, precision = std::string::npos;
    std::size_t i = 1;
    while (i < spec.size() && !std::isdigit(static_cast<unsigned char>(spec[i])) && spec[i] != '.')
        ++i;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])))
        width = width * 10 + static_cast<std::size_t>(spec[i++] - '0');
    if (i < spec.size() && spec[i] == '.') {
        precision = 0;
        while (++i < spec.size())
            precision = precision * 10 + static_cast<std::size_t>(spec[i] - '0');
    }
    std::vector<char32_t> cps = unicode::decode(text);
    if (precision < cps.size()) cps.resize(precision);
    std::string body = unicode::encode(cps);
    const std::string fill(width > cps.size() ? width - cps.size() : 0, ' ');
    return left ? body + fill : fill + body;
}

}  // namespace

std::string percent_format(const std::string& fmt, const Value& args) {
    std::vector<Value> positional;
    const Dict* mapping = nullptr;
    if (args.is_tuple())
        positional = args.items();
    else if (args.is_dict())
        mapping = &args.as_dict();
    else
        positional.push_back(args);
    std::size_t next = 0;
    std::string out;
    for (std::size_t i = 0; i < fmt.size(); ++i) {
        if (fmt[i] != '%') {
            out += fmt[i];
            continue;
        }
        if (++i >= fmt.size()) throw EvalError("incomplete format");
        if (fmt[i] == '%') {
            out += '%';
            continue;
        }
        const Value* arg = nullptr;
        if (fmt[i] == '(') {
            const std::size_t close = fmt.find(')', i);
            if (close == std::string::npos || mapping == nullptr)
                throw EvalError("format requires a mapping");
            arg = mapping->find(std::string_view(fmt).substr(i + 1, close - i - 1));
            if (arg == nullptr) throw EvalError("format key not found");
            i = close + 1;
        }
        std::string spec = "%";
        while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos)
            spec += fmt[i++];
        int digits = 0;
        while (i < fmt.size() &&
               (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.')) {
            if (++digits > 6) throw EvalError("format width too large");
            spec += fmt[i++];
        }
        if (i >= fmt.size()) throw EvalError("incomplete format");
        const char conv = fmt[i];
        if (arg == nullptr) {
            if (next >= positional.size())
                throw EvalError("not enough arguments for format string");
            arg = &positional[next++];
        }
        char buf[512];
        switch (conv) {
            case 's':
            case 'r': {
                out += pad_text(conv == 's' ? py_str(*arg) : py_repr(*arg), spec);
                break;
            }
            case 'd':
            case 'i':
            case 'x':
            case 'X':
            case 'o': {
                if (!arg->is_number())
                    throw EvalError(concat("%", conv, " format: a real number is required, not ",
                                           arg->type_name()));
                const long long v =
                    arg->is_float() ? static_cast<long long>(arg->as_float()) : arg->as_int();
                std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                              v);
                out += buf;
                break;
            }
            case 'f':
            case 'F':
            case 'e':
            case 'E':
            case 'g':
            case 'G': {
                if (!arg->is_number())
                    throw EvalError(concat("must be real number, not ", arg->type_name()));
                std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_float());
                out += buf;
                break;
            }
            default:
                throw EvalError(concat("unsupported format character '", conv, "'"));
        }
    }
    if (mapping == nullptr && next < positional.size())
        throw EvalError("not all arguments converted during string formatting");
    return out;
}

namespace {

// Inserts a separator every three digits of the integer part: "1234567.5" -> "1,234,567.5".
std::string group_digits(const std::string& number, char separator) {
    std::size_t begin = 0;
    while (begin < number.size() && !std::isdigit(static_cast<unsigned char>(number[begin])))
        ++begin;
    std::size_t end = begin;
    while (end < number.size() && std::isdigit(static_cast<unsigned char>(number[end]))) ++end;
    std::string digits = number.substr(begin, end - begin), grouped;
    for (std::size_t k = 0; k < digits.size(); ++k) {
        if (k > 0 && (digits.size() - k) % 3 == 0) grouped += separator;
        grouped += digits[k];
    }
    return number.substr(0, begin) + grouped + number.substr(end);
}

// Formats one replacement field value with a format spec (the common subset of Python's).
std::string format_field(const Value& v, const std::string& spec) {
    if (spec.empty()) return py_str(v);
    std::size_t i = 0;
    std::string fill = " ";
    char align = 0;
    const std::vector<char32_t> cps = unicode::decode(spec);
    std::size_t k = 0;
    if (cps.size() >= 2 && (cps[1] == '<' || cps[1] == '>' || cps[1] == '^' || cps[1] == '=')) {
        fill.clear();
        unicode::append_utf8(fill, cps[0]);
        align = static_cast<char>(cps[1]);
        k = 2;
    } else if (!cps.empty() && (cps[0] == '<' || cps[0] == '>' || cps[0] == '^' || cps[0] == '=')) {
        align = static_cast<char>(cps[0]);
        k = 1;
    }
    const std::string rest = unicode::encode(
        std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(k), cps.end()));
    std::string sign;
    if (i < rest.size() && (rest[i] == '+' || rest[i] == '-' || rest[i] == ' ')) sign = rest[i++];
    bool zero = false;
    if (i < rest.size() && rest[i] == '0') {
        zero = true;
        ++i;
    }
    std::size_t width = 0;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])) && width < 100000)
        width = width * 10 + static_cast<std::size_t>(rest[i++] - '0');
    char grouping = 0;
    if (i < rest.size() && (rest[i] == ',' || rest[i] == '_')) grouping = rest[i++];
    int precision = -1;
    if (i < rest.size() && rest[i] == '.') {
        precision = 0;
        while (++i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])) &&
               precision < 1000)
            precision = precision * 10 + (rest[i] - '0');
    }
    char type = i < rest.size() ? rest[i++] : 0;
    if (i != rest.size()) throw EvalError(concat("Invalid format specifier '", spec, "'"));
    std::string body;
    char buf[2048];
    if (v.is_string() || (!v.is_number())) {
        if (type != 0 && type != 's')
            throw EvalError(concat("Unknown format code '", type, "' for object of type '",
                                   v.type_name(), "'"));
        std::vector<char32_t> text = unicode::decode(py_str(v));
        if (precision >= 0 && static_cast<std::size_t>(precision) < text.size())
            text.resize(static_cast<std::size_t>(precision));
        body = unicode::encode(text);
        if (!align) align = '<';
    } else {
        if (!align) align = '>';
        if (zero && !spec.empty() && align == '>') fill = "0", align = '=';
        const std::string flags = sign == "+" ? "+" : sign == " " ? " " : "";
        if (type == 'd' || (type == 0 && !v.is_float())) {
            if (v.is_float()) throw EvalError("Unknown format code 'd' for object of type 'float'");
            std::snprintf(buf, sizeof buf, ("%" + flags + "lld").c_str(),
                          static_cast<long long>(v.as_int()));
        } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' ||
                   type == 'G' || type == '%') {
            const double x = v.as_float() * (type == '%' ? 100.0 : 1.0);
            std::snprintf(buf, sizeof buf,
                          ("%" + flags + "." + std::to_string(precision < 0 ? 6 : precision) +
                           (type == '%' ? 'f' : type))
                              .c_str(),
                          x);
            if (type == '%') std::strncat(buf, "%", sizeof buf - std::strlen(buf) - 1);
        } else if (type == 0) {
            if (precision >= 0)
                std::snprintf(buf, sizeof buf,
                              ("%" + flags + "." + std::to_string(precision) + "g").c_str(),
                              v.as_float());
            else
                std::snprintf(buf, sizeof buf, "%s%s", flags.c_str(),
                              float_repr(v.as_float()).c_str());
        } else if (type == 'x' || type == 'X' || type == 'o' || type == 'b') {
            if (v.is_float())
                throw EvalError(
                    concat("Unknown format code '", type, "' for object of type 'float'"));
            if (type == 'b') {
                unsigned long long u = static_cast<unsigned long long>(std::llabs(v.as_int()));
                std::string bits;
                do bits.insert(bits.begin(), static_cast<char>('0' + (u & 1)));
                while (u >>= 1);
                std::snprintf(buf, sizeof buf, "%s%s", v.as_int() < 0 ? "-" : "", bits.c_str());
            } else {
                std::snprintf(buf, sizeof buf, (std::string("%") + flags + "ll" + type).c_str(),
                              static_cast<long long>(v.as_int()));
            }
        } else {
            throw EvalError(concat("Unknown format code '", type, "' for object of type '",
                                   v.type_name(), "'"));
        }
        body = buf;
        if (grouping) body = group_digits(body, grouping);
    }
    const std::size_t n = unicode::length(body);
    if (n >= width) return body;
    const std::size_t margin = width - n;
    std::string out;
    const auto repeat_fill = [&](std::size_t count) {
        for (std::size_t j = 0; j < count; ++j) out += fill;
    };
    if (align == '<') {
        out = body;
        repeat_fill(margin);
    } else if (align == '>') {
        repeat_fill(margin);
        out += body;
    } else if (align == '^') {
        repeat_fill(margin / 2);
        out += body;
        repeat_fill(margin - margin / 2);
    } else {  // '=': padding after the sign
        const bool has_sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ');
        if (has_sign) out += body[0];
        repeat_fill(margin);
        out += has_sign ? body.substr(1) : body;
    }
    return out;
}

}  // namespace

std::string python_str_format(const std::string& format, const CallArgs& args) {
    std::string out;
    std::size_t auto_index = 0;
    for (std::size_t i = 0; i < format.size(); ++i) {
        const char c = format[i];
        if (c == '}') {
            if (i + 1 < format.size() && format[i + 1] == '}') {
                out += '}';
                ++i;
                continue;
            }
            throw EvalError("Single '}' encountered in format string");
        }
        if (c != '{') {
            out += c;
            continue;
        }
        if (i + 1 < format.size() && format[i + 1] == '{') {
            out += '{';
            ++i;
            continue;
        }
        const std::size_t close = format.find('}', i);
        if (close == std::string::npos) throw EvalError("Single '{' encountered in format string");
        std::string field = format.substr(i + 1, close - i - 1);
        i = close;
        std::string spec;
        if (const std::size_t colon = field.find(':'); colon != std::string::npos) {
            spec = field.substr(colon + 1);
            field.resize(colon);
        }
        bool repr = false;
        if (const std::size_t bang = field.find('!'); bang != std::string::npos) {
            repr = field.substr(bang + 1) == "r";
            field.resize(bang);
        }
        // The argument name: up to the first '.' or '['.
        const std::size_t cut = field.find_first_of(".[");
        const std::string head = field.substr(0, cut);
        Value value;
        if (head.empty()) {
            if (auto_index >= args.positional.size())
                throw EvalError(concat("Replacement index ", auto_index,
                                       " out of range for positional args tuple"));
            value = args.positional[auto_index++];
        } else if (std::all_of(head.begin(), head.end(),
                               [](char ch) { return ch >= '0' && ch <= '9'; })) {
            const std::size_t index = head.size() < 9 ? std::stoul(head) : SIZE_MAX;
            if (index >= args.positional.size())
                throw EvalError(
                    concat("Replacement index ", head, " out of range for positional args tuple"));
            value = args.positional[index];
        } else {
            const auto it = std::find_if(args.keyword.begin(), args.keyword.end(),
                                         [&](const auto& kv) { return kv.first == head; });
            if (it == args.keyword.end()) throw EvalError(concat("'", head, "'"));
            value = it->second;
        }
        std::size_t pos = cut;
        while (pos != std::string::npos && pos < field.size()) {
            if (field[pos] == '.') {
                const std::size_t next = field.find_first_of(".[", pos + 1);
                value = get_attr(value,
                                 field.substr(pos + 1, next == std::string::npos ? std::string::npos
                                                                                 : next - pos - 1));
                pos = next;
            } else {
                const std::size_t end = field.find(']', pos);
                if (end == std::string::npos) throw EvalError("Missing ']' in format string");
                const std::string key = field.substr(pos + 1, end - pos - 1);
                const bool digits = !key.empty() && key.size() < 18 &&
                                    std::all_of(key.begin(), key.end(),
                                                [](char ch) { return ch >= '0' && ch <= '9'; });
                value =
                    get_item(value, digits ? Value::integer(std::stoll(key)) : Value::string(key));
                pos = end + 1;
            }
        }
        if (value.is_undefined()) fail_undefined(value);
        out += format_field(repr ? Value::string(py_repr(value)) : value, spec);
    }
    return out;
}

}  // namespace minfer::jinja
