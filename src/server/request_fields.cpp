#include "server/request_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "server/api_error.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxTools = 128;

}  // namespace

void bad_field(const std::string& param, const std::string& message) {
    throw ApiError(400, message, param);
}

const char* json_kind(const Json& v) {
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
}

Json parse_json_object(std::string_view body) {
    Json doc;
    try {
        doc = Json::parse(body, [](int depth, Json::parse_event_t, Json&) {
            if (depth > kMaxDepth)
                throw ApiError(400, concat("the request nests deeper than ", kMaxDepth, " levels"));
            return true;
        });
    } catch (const Json::exception& e) {
        // parse_error, and out_of_range for a number beyond double's range (found by fuzzing: it
        // escaped as a 500).
        throw ApiError(400, concat("the request body is not valid JSON: ", e.what()));
    }
    if (!doc.is_object())
        throw ApiError(400, concat("the request body must be a JSON object, got ", json_kind(doc)));
    return doc;
}

const Json* Fields::get(const char* name) const {
    const auto it = o_.find(name);
    return it == o_.end() || it->is_null() ? nullptr : &*it;
}

std::optional<bool> Fields::boolean(const char* name) const {
    const Json* v = get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_boolean())
        bad_field(name, concat("'", name, "' must be a boolean, got ", json_kind(*v)));
    return v->get<bool>();
}

std::optional<double> Fields::number(const char* name, double lo, double hi) const {
    const Json* v = get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_number())
        bad_field(name, concat("'", name, "' must be a number, got ", json_kind(*v)));
    const double x = v->get<double>();
    if (!(x >= lo && x <= hi))
        bad_field(name, concat("'", name, "' must be between ", lo, " and ", hi, ", got ", x));
    return x;
}

std::optional<int64_t> Fields::integer(const char* name, int64_t lo, int64_t hi) const {
    const Json* v = get(name);
    if (v == nullptr) return std::nullopt;
    const auto value = as_integer(*v);
    if (!value) bad_field(name, concat("'", name, "' must be an integer, got ", json_kind(*v)));
    if (*value < lo || *value > hi)
        bad_field(name, concat("'", name, "' must be between ", lo, " and ", hi, ", got ", *value));
    return *value;
}

std::optional<std::string> Fields::string(const char* name) const {
    const Json* v = get(name);
    if (v == nullptr) return std::nullopt;
    if (!v->is_string())
        bad_field(name, concat("'", name, "' must be a string, got ", json_kind(*v)));
    return v->get<std::string>();
}

std::optional<int64_t> Fields::as_integer(const Json& v) {
    if (v.is_number_integer()) {
        if (v.is_number_unsigned()) {
            const auto u = v.get<uint64_t>();
            return u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                       ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(u);
        }
        return v.get<int64_t>();
    }
    if (v.is_number_float()) {
        const double d = v.get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
            return static_cast<int64_t>(d);
    }
    return std::nullopt;
}

Json check_function_tools(const Json& tools) {
    if (!tools.is_array())
        bad_field("tools", concat("'tools' must be an array, got ", json_kind(tools)));
    if (tools.size() > kMaxTools)
        bad_field("tools", concat("'tools' holds at most ", kMaxTools, " functions"));
    std::vector<std::string> names;
    for (std::size_t i = 0; i < tools.size(); ++i) {
        const std::string where = concat("tools[", i, "]");
        const Json& t = tools[i];
        if (!t.is_object()) bad_field("tools", concat("'", where, "' must be an object"));
        if (Fields(t).string("type").value_or("") != "function")
            bad_field("tools", concat("'", where, ".type' must be 'function'"));
        const Json* fn = Fields(t).get("function");
        if (fn == nullptr || !fn->is_object())
            bad_field("tools", concat("'", where, ".function' must be an object"));
        const auto name = Fields(*fn).string("name");
        const bool valid = name && !name->empty() && name->size() <= 64 &&
                           name->find_first_not_of(
                               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                               "UVWXYZ0123456789_-") == std::string::npos;
        if (!valid)
            bad_field(
                "tools",
                concat("'", where, ".function.name' must be 1 to 64 letters, digits, '_' or '-'"));
        if (std::find(names.begin(), names.end(), *name) != names.end())
            bad_field("tools", concat("two tools are named '", *name, "'"));
        names.push_back(*name);
        Fields(*fn).string("description");
        if (const Json* p = Fields(*fn).get("parameters"); p != nullptr && !p->is_object())
            bad_field("tools",
                      concat("'", where, ".function.parameters' must be a JSON Schema object"));
    }
    return tools;
}

}  // namespace minfer::server
