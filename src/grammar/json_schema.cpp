#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/utf8.h"
#include "grammar/grammar.h"
#include "grammar/json_schema_parts.h"
#include "grammar/regex_pattern.h"

namespace minfer::grammar {
namespace {

using Json = nlohmann::ordered_json;

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default",    "examples", "$schema",
    "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};

const std::set<std::string, std::less<>> kKeywords = {"type",
                                                      "properties",
                                                      "required",
                                                      "additionalProperties",
                                                      "enum",
                                                      "const",
                                                      "items",
                                                      "prefixItems",
                                                      "minItems",
                                                      "maxItems",
                                                      "minLength",
                                                      "maxLength",
                                                      "pattern",
                                                      "format",
                                                      "minimum",
                                                      "maximum",
                                                      "exclusiveMinimum",
                                                      "exclusiveMaximum",
                                                      "anyOf",
                                                      "oneOf",
                                                      "allOf",
                                                      "$ref",
                                                      "$defs",
                                                      "definitions"};

const char* kind_of(const Json& v) {
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
}

std::string pointer_child(const std::string& pointer, const std::string& key) {
    std::string escaped;
    for (const char c : key) {
        if (c == '~') {
            escaped += "~0";
        } else if (c == '/') {
            escaped += "~1";
        } else {
            escaped += c;
        }
    }
    return pointer + "/" + escaped;
}

// A rule name from a hint: letters, digits and '-'.
std::string sanitize(const std::string& hint) {
    std::string out;
    for (const char c : hint) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (ok) {
            out += c;
        } else if (!out.empty() && out.back() != '-') {
            out += '-';
        }
        if (out.size() >= 60) break;
    }
    while (!out.empty() && out.back() == '-') out.pop_back();
    return out.empty() ? "x" : out;
}

class SchemaConverter {
  public:
    SchemaConverter() {
        for (const char* name : json_parts::kBuiltinNames) names_.insert(name);
        names_.insert("root");
    }

    // The rule that matches the schema's values; its references resolve within `schema`.
    std::string add_schema(const Json& schema, const std::string& name) {
        root_ = &schema;
        ref_rules_.clear();  // pointers are relative to each schema
        merged_refs_.clear();
        const std::string body = visit(schema, name, "#", 0);
        root_ = nullptr;
        return add_rule(name, body);
    }

    std::string add_rule(const std::string& hint, const std::string& body) {
        const std::string name = unique_name(hint);
        rules_.emplace_back(name, body);
        return name;
    }

    std::string rules() const {
        std::string out;
        for (const auto& [name, rule] : rules_) out += name + " ::= " + rule + "\n";
        for (const std::string& name : builtins_) out += json_parts::builtin_rule(name) + "\n";
        if (out.size() > kMaxGrammarBytes)
            throw UsageError(concat("json schema: the grammar it makes is ", out.size(),
                                    " bytes, more than the ", kMaxGrammarBytes, " allowed"));
        return out;
    }

    std::string reserve(const std::string& hint) { return unique_name(hint); }

    // A builtin rule (json_parts), emitted once at the end.
    std::string use(const std::string& name) {
        if (std::find(builtins_.begin(), builtins_.end(), name) != builtins_.end()) return name;
        builtins_.push_back(name);  // before its dependencies: value and object use each other
        for (const std::string& dependency : json_parts::builtin_dependencies(name))
            use(dependency);
        return name;
    }

  private:
    [[noreturn]] static void fail(const std::string& pointer, const std::string& what) {
        throw UsageError(concat("json schema: ", what, " at ", pointer));
    }

    std::string unique_name(const std::string& hint) {
        const std::string base = sanitize(hint);
        std::string name = base;
        for (int& i = next_suffix_[base]; names_.count(name) != 0;)
            name = concat(base, "-", ++i + 1);
        names_.insert(name);
        return name;
    }

    static std::string literal(const std::string& text) {
        return expr_to_gbnf(Expr::literal(text));
    }

    // A JSON value written out: its compact JSON text, then whitespace.
    std::string json_literal(const Json& v) {
        return literal(v.dump(-1, ' ', false, Json::error_handler_t::strict));
    }

    const Json& resolve(const std::string& ref, const std::string& pointer) const {
        if (ref.empty() || ref[0] != '#')
            fail(pointer, concat("the $ref '", ref, "' is not local (only '#...' references are)"));
        const Json* at = root_;
        std::size_t i = 1;
        if (i < ref.size() && ref[i] != '/')
            fail(pointer, concat("the $ref '", ref, "' is not a JSON pointer"));
        while (i < ref.size()) {
            const std::size_t next = ref.find('/', i + 1);
            std::string token =
                ref.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
            i = next == std::string::npos ? ref.size() : next;
            std::string decoded;
            for (std::size_t k = 0; k < token.size(); ++k) {
                if (token[k] == '~' && k + 1 < token.size() &&
                    (token[k + 1] == '0' || token[k + 1] == '1')) {
                    decoded += token[k + 1] == '0' ? '~' : '/';
                    ++k;
                } else if (token[k] == '%' && k + 2 < token.size() &&
                           std::isxdigit(static_cast<unsigned char>(token[k + 1])) &&
                           std::isxdigit(static_cast<unsigned char>(token[k + 2]))) {
                    decoded += static_cast<char>(std::stoi(token.substr(k + 1, 2), nullptr, 16));
                    k += 2;
                } else {
                    decoded += token[k];
                }
            }
            if (at->is_object() && at->contains(decoded)) {
                at = &(*at)[decoded];
            } else if (at->is_array() && !decoded.empty() &&
                       decoded.find_first_not_of("0123456789") == std::string::npos &&
                       decoded.size() < 10 && std::stoul(decoded) < at->size()) {
                at = &(*at)[std::stoul(decoded)];
            } else {
                fail(pointer, concat("the $ref '", ref, "' points at nothing"));
            }
        }
        return *at;
    }

    std::string visit_ref(const std::string& ref, const std::string& pointer, int depth) {
        if (const auto it = ref_rules_.find(ref); it != ref_rules_.end()) return it->second;
        const Json& target = resolve(ref, pointer);
        const std::size_t slash = ref.rfind('/');
        const std::string name = unique_name(
            slash == std::string::npos || slash + 1 >= ref.size() ? "ref" : ref.substr(slash + 1));
        ref_rules_[ref] = name;  // before visiting: the target may refer to itself
        const std::size_t index = rules_.size();
        rules_.emplace_back(name, "");
        const std::string body = visit(target, name, ref, depth + 1);
        rules_[index].second = body;
        return name;
    }

    void check_keywords(const Json& s, const std::string& pointer) const {
        for (const auto& [key, value] : s.items()) {
            if (kKeywords.count(key) == 0 && kAnnotations.count(key) == 0)
                fail(pointer, concat("unsupported keyword '", key, "'"));
        }
    }

    // Keywords other than annotations and definitions.
    static std::vector<std::string> active_keywords(const Json& s) {
        std::vector<std::string> out;
        for (const auto& [key, value] : s.items()) {
            if (kAnnotations.count(key) == 0 && key != "$defs" && key != "definitions")
                out.push_back(key);
        }
        return out;
    }

    std::string visit(const Json& s, const std::string& hint, const std::string& pointer,
                      int depth) {
        if (depth > kMaxSchemaDepth)
            fail(pointer, concat("the schema nests deeper than ", kMaxSchemaDepth, " levels"));
        if (s.is_boolean()) {
            if (!s.get<bool>()) fail(pointer, "the schema 'false' allows no value");
            return use("value");
        }
        if (!s.is_object())
            fail(pointer, concat("a schema must be an object or a boolean, got ", kind_of(s)));
        check_keywords(s, pointer);
        const auto active = active_keywords(s);
        if (s.contains("$ref")) {
            if (!s["$ref"].is_string()) fail(pointer, "'$ref' must be a string");
            if (active.size() > 1)
                fail(pointer, "keywords beside '$ref' are not supported (put them in an 'allOf')");
            return visit_ref(s["$ref"].get<std::string>(), pointer, depth);
        }
        if (s.contains("allOf"))
            return visit(merge_all_of(s, pointer, depth), hint, pointer, depth + 1);
        for (const char* key : {"anyOf", "oneOf"}) {
            if (!s.contains(key)) continue;
            if (active.size() > 1)
                fail(pointer, concat("keywords beside '", key,
                                     "' are not supported (put them in each alternative)"));
            const Json& list = s[key];
            if (!list.is_array() || list.empty())
                fail(pointer, concat("'", key, "' must be a non-empty array"));
            std::string out;
            for (std::size_t i = 0; i < list.size(); ++i) {
                if (i > 0) out += " | ";
                out +=
                    visit(list[i], concat(hint, "-", i),
                          pointer_child(pointer_child(pointer, key), std::to_string(i)), depth + 1);
            }
            return add_rule(hint, out);
        }
        for (const char* key : {"const", "enum"}) {
            if (!s.contains(key)) continue;
            for (const std::string& other : active) {
                if (other != key && other != "type")
                    fail(pointer, concat("'", other, "' beside '", key,
                                         "' is not supported (only 'type' is)"));
            }
        }
        if (s.contains("const")) {
            if (s.contains("type")) {
                Json as_enum = s;
                as_enum.erase("const");
                as_enum["enum"] = Json::array({s["const"]});
                return visit_enum(as_enum, hint, pointer);
            }
            return json_literal(s["const"]);
        }
        if (s.contains("enum")) return visit_enum(s, hint, pointer);
        std::vector<std::string> types = types_of(s, pointer);
        if (types.empty()) return use("value");
        std::string out;
        for (const std::string& t : types) {
            if (!out.empty()) out += " | ";
            out += visit_type(s, t, hint, pointer, depth);
        }
        return types.size() == 1 ? out : add_rule(hint, out);
    }

    // The types a schema allows: its 'type', else what its keywords imply, else none (any value).
    std::vector<std::string> types_of(const Json& s, const std::string& pointer) const {
        static const std::set<std::string, std::less<>> known = {
            "string", "number", "integer", "boolean", "null", "object", "array"};
        std::vector<std::string> types;
        if (s.contains("type")) {
            const Json& t = s["type"];
            if (t.is_string()) {
                types.push_back(t.get<std::string>());
            } else if (t.is_array() && !t.empty()) {
                for (const Json& x : t) {
                    if (!x.is_string())
                        fail(pointer, "'type' must be a string or an array of strings");
                    types.push_back(x.get<std::string>());
                }
            } else {
                fail(pointer, "'type' must be a string or an array of strings");
            }
            for (const std::string& x : types) {
                if (known.count(x) == 0) fail(pointer, concat("unknown type '", x, "'"));
            }
            // "number" already holds every integer.
            if (std::find(types.begin(), types.end(), "number") != types.end())
                std::erase(types, "integer");
            return types;
        }
        for (const char* k : {"properties", "required", "additionalProperties"}) {
            if (s.contains(k)) return {"object"};
        }
        for (const char* k : {"items", "prefixItems", "minItems", "maxItems"}) {
            if (s.contains(k)) return {"array"};
        }
        for (const char* k : {"minLength", "maxLength", "pattern", "format"}) {
            if (s.contains(k)) return {"string"};
        }
        for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
            if (s.contains(k)) return {"number"};
        }
        return {};
    }

    std::string visit_enum(const Json& s, const std::string& hint, const std::string& pointer) {
        const Json& values = s["enum"];
        if (!values.is_array() || values.empty()) fail(pointer, "'enum' must be a non-empty array");
        if (values.size() > kMaxEnumValues)
            fail(pointer, concat("'enum' holds ", values.size(), " values, more than the ",
                                 kMaxEnumValues, " allowed"));
        // With a 'type' beside it, only the values of that type are valid.
        std::vector<std::string> types;
        if (s.contains("type")) types = types_of(s, pointer);
        const auto type_ok = [&](const Json& v) {
            if (types.empty()) return true;
            for (const std::string& t : types) {
                if ((t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) ||
                    (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
                    (t == "array" && v.is_array()) || (t == "number" && v.is_number()) ||
                    (t == "integer" &&
                     (v.is_number_integer() ||
                      (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()))))
                    return true;
            }
            return false;
        };
        std::string out;
        for (const Json& v : values) {
            if (!type_ok(v)) continue;
            if (!out.empty()) out += " | ";
            out += "(" + json_literal(v) + ")";
        }
        if (out.empty()) fail(pointer, "no value of 'enum' or 'const' has the schema's 'type'");
        return add_rule(hint, out);
    }

    std::string visit_type(const Json& s, const std::string& type, const std::string& hint,
                           const std::string& pointer, int depth) {
        if (type == "null") return use("null");
        if (type == "boolean") return use("boolean");
        if (type == "string") return visit_string(s, hint, pointer);
        if (type == "integer" || type == "number") return visit_number(s, type, pointer);
        if (type == "object") return visit_object(s, hint, pointer, depth);
        return visit_array(s, hint, pointer, depth);
    }

    std::optional<int64_t> count(const Json& s, const char* key, const std::string& pointer) const {
        if (!s.contains(key)) return std::nullopt;
        const Json& v = s[key];
        const bool integral =
            v.is_number_integer() ||
            (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
        if (!integral || v.get<double>() < 0)
            fail(pointer, concat("'", key, "' must be a non-negative integer, got ", v.dump()));
        if (v.get<double>() > kMaxRepeat)
            fail(pointer, concat("'", key, "' above ", kMaxRepeat, " is not supported"));
        return static_cast<int64_t>(v.get<double>());
    }

    std::string visit_string(const Json& s, const std::string& hint, const std::string& pointer) {
        const auto min = count(s, "minLength", pointer);
        const auto max = count(s, "maxLength", pointer);
        if (min && max && *max < *min) fail(pointer, "'maxLength' is below 'minLength'");
        const bool lengths = min || max;
        if (s.contains("format")) {
            if (!s["format"].is_string()) fail(pointer, "'format' must be a string");
            if (lengths || s.contains("pattern"))
                fail(pointer,
                     "'format' together with 'pattern', 'minLength' or 'maxLength' is not "
                     "supported");
            const std::string format = s["format"].get<std::string>();
            if (!json_parts::is_format(format))
                fail(pointer, concat("the format '", format,
                                     "' is not supported (date, time, date-time, uuid are)"));
            return "\"\\\"\" " + use(format) + " \"\\\"\"";
        }
        if (s.contains("pattern")) {
            if (!s["pattern"].is_string()) fail(pointer, "'pattern' must be a string");
            if (lengths)
                fail(pointer,
                     "'pattern' together with 'minLength' or 'maxLength' is not supported");
            Expr e;
            try {
                e = regex_to_expr(s["pattern"].get<std::string>(), true);
            } catch (const UsageError& error) {
                fail(pointer, error.what());
            }
            return add_rule(hint, "\"\\\"\" (" + expr_to_gbnf(e) + ") \"\\\"\"");
        }
        if (!lengths) return use("string");
        const std::string repeat =
            max ? concat("{", min.value_or(0), ",", *max, "}") : concat("{", min.value_or(0), ",}");
        return add_rule(hint, "\"\\\"\" " + use("char") + repeat + " \"\\\"\"");
    }

    // A numeric bound as an integer bound: the smallest (lower) or largest (upper) integer allowed.
    std::optional<int64_t> integer_bound(const Json& s, const char* key, bool lower, bool exclusive,
                                         const std::string& pointer) const {
        if (!s.contains(key)) return std::nullopt;
        const Json& v = s[key];
        if (!v.is_number()) fail(pointer, concat("'", key, "' must be a number"));
        const double x = v.get<double>();
        if (std::fabs(x) > 9e15) fail(pointer, concat("'", key, "' beyond 9e15 is not supported"));
        double bound = lower ? std::ceil(x) : std::floor(x);
        if (exclusive && bound == x) bound += lower ? 1 : -1;
        return static_cast<int64_t>(bound);
    }

    std::string visit_number(const Json& s, const std::string& type, const std::string& pointer) {
        if (type == "integer") {
            std::optional<int64_t> lo = integer_bound(s, "minimum", true, false, pointer);
            std::optional<int64_t> hi = integer_bound(s, "maximum", false, false, pointer);
            if (auto x = integer_bound(s, "exclusiveMinimum", true, true, pointer))
                lo = lo ? std::max(*lo, *x) : *x;
            if (auto x = integer_bound(s, "exclusiveMaximum", false, true, pointer))
                hi = hi ? std::min(*hi, *x) : *x;
            if (!lo && !hi) return use("integer");
            if (lo && hi && *lo > *hi)
                fail(pointer, "no integer lies within 'minimum' and 'maximum'");
            return "(" + json_parts::integer_range(lo, hi) + ")";
        }
        const auto bound = [&](const char* key,
                               bool exclusive) -> std::optional<json_parts::NumberBound> {
            if (!s.contains(key)) return std::nullopt;
            if (!s[key].is_number()) fail(pointer, concat("'", key, "' must be a number"));
            const double x = s[key].get<double>();
            if (std::fabs(x) > 9e15)
                fail(pointer, concat("'", key, "' beyond 9e15 is not supported"));
            return json_parts::NumberBound{x, exclusive};
        };
        // The tighter of each pair of bounds.
        auto lo = bound("minimum", false), hi = bound("maximum", false);
        if (auto x = bound("exclusiveMinimum", true); x && (!lo || x->value >= lo->value)) lo = x;
        if (auto x = bound("exclusiveMaximum", true); x && (!hi || x->value <= hi->value)) hi = x;
        if (!lo && !hi) return use("number");
        const std::string range = json_parts::number_range(lo, hi);
        if (range.empty()) fail(pointer, "no number with up to 16 digits lies within the bounds");
        return "(" + range + ")";
    }

    std::string visit_object(const Json& s, const std::string& hint, const std::string& pointer,
                             int depth) {
        struct Property {
            std::string name;
            std::string value;  // grammar of the value
            bool required;
        };
        std::vector<Property> props;
        std::set<std::string> required;
        if (s.contains("required")) {
            const Json& r = s["required"];
            if (!r.is_array()) fail(pointer, "'required' must be an array of strings");
            for (const Json& name : r) {
                if (!name.is_string()) fail(pointer, "'required' must be an array of strings");
                required.insert(name.get<std::string>());
            }
        }
        if (s.contains("properties")) {
            const Json& p = s["properties"];
            if (!p.is_object()) fail(pointer, "'properties' must be an object");
            if (p.size() > kMaxTupleItems)
                fail(pointer, concat("more than ", kMaxTupleItems, " properties"));
            for (const auto& [name, schema] : p.items()) {
                const std::string where = pointer_child(pointer_child(pointer, "properties"), name);
                props.push_back({name, visit(schema, hint + "-" + name, where, depth + 1),
                                 required.count(name) != 0});
            }
        }
        std::optional<std::string> additional;  // the grammar of additional values
        if (s.contains("additionalProperties")) {
            const Json& a = s["additionalProperties"];
            if (!(a.is_boolean() && !a.get<bool>()))
                additional = visit(a, hint + "-additional",
                                   pointer_child(pointer, "additionalProperties"), depth + 1);
        }
        for (const std::string& name : required) {
            const bool declared = std::any_of(props.begin(), props.end(),
                                              [&](const Property& p) { return p.name == name; });
            if (declared) continue;
            if (!additional)
                fail(pointer,
                     concat("the required property '", name, "' is not among 'properties'"));
            props.push_back({name, *additional, true});
        }
        if (props.size() > kMaxTupleItems)
            fail(pointer, concat("more than ", kMaxTupleItems, " properties"));
        const auto kv = [&](const Property& p) {
            return literal(Json(p.name).dump(-1, ' ', false, Json::error_handler_t::replace)) +
                   " " + use("ws") + " \":\" " + use("ws") + " " + p.value + " " + use("ws");
        };
        std::string additional_kv;
        if (additional) {
            std::vector<std::string> names;
            for (const Property& p : props) names.push_back(p.name);
            additional_kv =
                add_rule(hint + "-additional-kv", key_not_in(names, hint, pointer) + " " +
                                                      use("ws") + " \":\" " + use("ws") + " " +
                                                      *additional + " " + use("ws"));
        }
        // rest(i, first): the properties from i on, `first` when none was written yet (no comma).
        const std::size_t n = props.size();
        std::vector<std::string> after(n + 1), from_start(n + 1);
        after[n] = additional ? "(\",\" " + use("ws") + " " + additional_kv + ")*" : "";
        from_start[n] =
            additional ? "(" + additional_kv + " (\",\" " + use("ws") + " " + additional_kv + ")*)?"
                       : "";
        for (std::size_t k = n; k-- > 0;) {
            const std::string rest_after = after[k + 1].empty() ? "" : " " + after[k + 1];
            const std::string with = kv(props[k]) + rest_after;
            const std::string comma_with = "\",\" " + use("ws") + " " + with;
            after[k] =
                props[k].required
                    ? comma_with
                    : "(" + comma_with + (after[k + 1].empty() ? ")?" : " | " + after[k + 1] + ")");
            from_start[k] =
                props[k].required
                    ? with
                    : "(" + with +
                          (from_start[k + 1].empty() ? ")?" : " | " + from_start[k + 1] + ")");
            if (k > 0) {
                after[k] = add_rule(hint + "-after-" + props[k].name, after[k]);
                from_start[k] = add_rule(hint + "-from-" + props[k].name, from_start[k]);
            }
        }
        std::string body =
            "\"{\" " + use("ws") + (from_start[0].empty() ? "" : " " + from_start[0]) + " \"}\"";
        return add_rule(hint, body);
    }

    std::string visit_array(const Json& s, const std::string& hint, const std::string& pointer,
                            int depth) {
        std::vector<std::string> prefix;
        const Json* items = s.contains("items") ? &s["items"] : nullptr;
        const Json* prefix_items = s.contains("prefixItems") ? &s["prefixItems"] : nullptr;
        if (items != nullptr && items->is_array()) {  // draft-04 tuples
            if (prefix_items != nullptr) fail(pointer, "'items' as an array beside 'prefixItems'");
            prefix_items = items;
            items = nullptr;
        }
        if (prefix_items != nullptr) {
            if (!prefix_items->is_array()) fail(pointer, "'prefixItems' must be an array");
            if (prefix_items->size() > kMaxTupleItems)
                fail(pointer, concat("more than ", kMaxTupleItems, " 'prefixItems'"));
            for (std::size_t i = 0; i < prefix_items->size(); ++i)
                prefix.push_back(
                    visit((*prefix_items)[i], concat(hint, "-", i),
                          pointer_child(pointer_child(pointer, "prefixItems"), std::to_string(i)),
                          depth + 1));
        }
        const bool no_more = items != nullptr && items->is_boolean() && !items->get<bool>();
        std::string item;
        if (!no_more)
            item = items != nullptr
                       ? visit(*items, hint + "-item", pointer_child(pointer, "items"), depth + 1)
                       : use("value");
        const int64_t p = static_cast<int64_t>(prefix.size());
        const int64_t min = count(s, "minItems", pointer).value_or(0);
        std::optional<int64_t> max = count(s, "maxItems", pointer);
        if (no_more) max = max ? std::min(*max, p) : p;
        if (max && *max < min)
            fail(pointer, "'maxItems' is below 'minItems' (or the number of 'prefixItems')");
        const auto slot = [&](int64_t j) {
            return j < p ? prefix[static_cast<std::size_t>(j)] : item;
        };
        // tail(j): the elements from index j >= 1 on, each after a comma. Built from the last one
        // back; an optional element is a rule of its own, so many of them do not nest groups.
        const auto tail = [&](int64_t j) {
            int64_t last = j;  // one past the last prefix element that may appear
            while (last < p && (!max || last < *max)) ++last;
            std::string out;
            if ((!max || last < *max) && last >= p && !no_more) {
                const int64_t lo = std::max<int64_t>(0, min - last);
                const std::string upper = max ? std::to_string(*max - last) : "";
                out = "(\",\" " + use("ws") + " " + item + " " + use("ws") + "){" +
                      std::to_string(lo) + "," + upper + "}";
            }
            for (int64_t k = last; k-- > j;) {
                const std::string element = "\",\" " + use("ws") + " " + slot(k) + " " + use("ws") +
                                            (out.empty() ? "" : " " + out);
                out = k < min ? element : add_rule(concat(hint, "-tail-", k), "(" + element + ")?");
            }
            return out.empty() ? out : " " + out;
        };
        std::string body;
        if (max && *max == 0) {
            body = "\"[\" " + use("ws") + " \"]\"";
        } else {
            const std::string elements = slot(0) + " " + use("ws") + tail(1);
            body = "\"[\" " + use("ws") + " " + (min == 0 ? "(" + elements + ")?" : elements) +
                   " \"]\"";
        }
        return add_rule(hint, body);
    }

    // The schemas of an allOf merged into one. A $ref inside is followed (each target merged
    // once, however often it is referred to); a cycle of them is refused.
    Json merge_all_of(const Json& s, const std::string& pointer, int depth) {
        if (depth > kMaxSchemaDepth)
            fail(pointer, concat("'allOf' nests deeper than ", kMaxSchemaDepth, " levels"));
        const Json& list = s["allOf"];
        if (!list.is_array() || list.empty()) fail(pointer, "'allOf' must be a non-empty array");
        Json merged = Json::object();
        std::vector<const Json*> parts;
        Json rest = s;
        rest.erase("allOf");
        parts.push_back(&rest);
        std::vector<std::shared_ptr<const Json>> resolved;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const Json* part = &list[i];
            std::string ref;
            for (int hops = 0; part->is_object() && part->contains("$ref"); ++hops) {
                if (hops > kMaxSchemaDepth) fail(pointer, "'allOf' follows too many '$ref's");
                if (!(*part)["$ref"].is_string()) fail(pointer, "'$ref' must be a string");
                ref = (*part)["$ref"].get<std::string>();
                part = &resolve(ref, pointer);
            }
            if (part->is_object() && part->contains("allOf")) {
                if (ref.empty()) {
                    resolved.push_back(
                        std::make_shared<Json>(merge_all_of(*part, pointer, depth + 1)));
                } else if (const auto it = merged_refs_.find(ref); it != merged_refs_.end()) {
                    resolved.push_back(it->second);
                } else {
                    if (!merging_refs_.insert(ref).second)
                        fail(pointer, concat("'allOf' refers back to itself through '", ref, "'"));
                    auto result = std::make_shared<Json>(merge_all_of(*part, pointer, depth + 1));
                    merging_refs_.erase(ref);
                    merged_refs_.emplace(ref, result);
                    resolved.push_back(std::move(result));
                }
                part = resolved.back().get();
            }
            if (!part->is_object()) fail(pointer, "'allOf' must hold schema objects");
            parts.push_back(part);
        }
        for (const Json* part : parts) {
            for (const auto& [key, value] : part->items()) {
                if (kAnnotations.count(key) != 0) continue;
                if (key == "properties") {
                    if (!value.is_object()) fail(pointer, "'properties' must be an object");
                    for (const auto& [name, schema] : value.items()) {
                        Json& slot = merged["properties"][name];
                        if (!slot.is_null() && slot != schema)
                            fail(pointer, concat("'allOf' gives the property '", name,
                                                 "' two different schemas"));
                        slot = schema;
                    }
                } else if (key == "required") {
                    if (!value.is_array()) fail(pointer, "'required' must be an array of strings");
                    for (const Json& name : value) {
                        Json& r = merged["required"];
                        if (r.is_null()) r = Json::array();
                        if (std::find(r.begin(), r.end(), name) == r.end()) r.push_back(name);
                    }
                } else if (!merged.contains(key)) {
                    merged[key] = value;
                } else if (merged[key] != value) {
                    fail(pointer,
                         concat("'allOf' cannot combine two different values of '", key, "'"));
                }
            }
        }
        return merged;
    }

    // A JSON string other than the given ones (the keys of additional properties must not repeat
    // a declared one): a trie of the names, leaving it at any point for any other text.
    std::string key_not_in(const std::vector<std::string>& names, const std::string& hint,
                           const std::string& pointer) {
        struct Node {
            std::map<char32_t, std::size_t> children;
            bool is_name = false;
        };
        std::vector<Node> trie(1);
        for (const std::string& name : names) {
            if (!is_valid_utf8(name)) fail(pointer, "a property name that is not valid UTF-8");
            std::size_t at = 0;
            char32_t cp = 0;
            for (std::size_t i = 0; i < name.size();) {
                i += decode_utf8(name, i, cp);
                if (cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F)
                    fail(pointer,
                         "'additionalProperties' beside property names that JSON escapes is not "
                         "supported");
                const auto [it, inserted] = trie[at].children.try_emplace(cp, trie.size());
                const std::size_t next = it->second;
                if (inserted) trie.emplace_back();
                at = next;
            }
            trie[at].is_name = true;
        }
        const std::string any_rest = use("char") + "* \"\\\"\"";
        std::vector<std::string> rule_names(trie.size());
        for (std::size_t i = 0; i < trie.size(); ++i) rule_names[i] = unique_name(hint + "-key");
        for (std::size_t i = 0; i < trie.size(); ++i) {
            std::vector<std::string> alternatives;
            if (!trie[i].is_name) alternatives.push_back("\"\\\"\"");
            std::vector<CodepointRange> excluded{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}};
            for (const auto& [cp, child] : trie[i].children) {
                std::string text;
                append_utf8(text, cp);
                alternatives.push_back(literal(text) + " " + rule_names[child]);
                excluded.push_back({cp, cp});
            }
            alternatives.push_back(expr_to_gbnf(Expr::char_class(complement(normalize(excluded)))) +
                                   " " + any_rest);
            alternatives.push_back("\"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) " + any_rest);
            std::string body;
            for (const std::string& a : alternatives) body += (body.empty() ? "" : " | ") + a;
            rules_.emplace_back(rule_names[i], body);
        }
        return "\"\\\"\" " + rule_names[0];
    }

    const Json* root_ = nullptr;  // the schema being added
    std::vector<std::pair<std::string, std::string>> rules_;
    std::set<std::string> names_;
    std::map<std::string, int> next_suffix_;  // per base name: the suffix to try next, less 1
    std::map<std::string, std::string> ref_rules_;
    std::map<std::string, std::shared_ptr<const Json>> merged_refs_;  // allOf targets, merged
    std::set<std::string> merging_refs_;                              // being merged now
    std::vector<std::string> builtins_;
};

}  // namespace

std::string json_schema_to_gbnf(const Json& schema) {
    SchemaConverter converter;
    const std::string value = converter.add_schema(schema, "value-of-root");
    return "root ::= " + value + "\n" + converter.rules();
}

struct JsonGrammarBuilder::Impl {
    SchemaConverter converter;
};

JsonGrammarBuilder::JsonGrammarBuilder() : impl_(std::make_unique<Impl>()) {}
JsonGrammarBuilder::~JsonGrammarBuilder() = default;

std::string JsonGrammarBuilder::add_schema(const Json& schema, const std::string& name) {
    return impl_->converter.add_schema(schema, name);
}

std::string JsonGrammarBuilder::add_rule(const std::string& hint, const std::string& body) {
    return impl_->converter.add_rule(hint, body);
}

std::string JsonGrammarBuilder::reserve_name(const std::string& hint) {
    return impl_->converter.reserve(hint);
}

std::string JsonGrammarBuilder::builtin(const std::string& name) {
    return impl_->converter.use(name);
}

std::string JsonGrammarBuilder::rules() const {
    return impl_->converter.rules();
}

Json parse_json_schema_text(std::string_view text) {
    try {
        return Json::parse(text, [](int depth, Json::parse_event_t, Json&) {
            if (depth > kMaxSchemaTextDepth)
                throw UsageError(
                    concat("json schema: nests deeper than ", kMaxSchemaTextDepth, " levels"));
            return true;
        });
    } catch (const Json::exception& e) {
        throw UsageError(concat("json schema: not valid JSON: ", e.what()));
    }
}

std::string json_object_gbnf() {
    std::string out = "root ::= " + std::string("object") + "\n";
    for (const char* name :
         {"object", "value", "array", "string", "char", "number", "boolean", "null", "ws"})
        out += json_parts::builtin_rule(name) + "\n";
    return out;
}

}  // namespace minfer::grammar
