#pragma once
// Reading the JSON body of an API request, for every front end (OpenAI, Anthropic): typed access
// to fields, where a field of the wrong type or out of range is an ApiError 400 naming it (each
// front end renders that error in its own API's shape).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace minfer::server {

// Throws ApiError(400, message, param).
[[noreturn]] void bad_field(const std::string& param, const std::string& message);

// "a string", "an object", ... for messages.
const char* json_kind(const nlohmann::ordered_json& v);

// The JSON object of a body (400 for malformed JSON, another value, or nesting beyond 64 levels:
// nothing in the APIs nests more than a few, and deep values make later walks costly).
nlohmann::ordered_json parse_json_object(std::string_view body);

// Typed access to the fields of a request object; null counts as absent.
class Fields {
  public:
    explicit Fields(const nlohmann::ordered_json& object) : o_(object) {}

    const nlohmann::ordered_json* get(const char* name) const;
    std::optional<bool> boolean(const char* name) const;
    std::optional<double> number(const char* name, double lo, double hi) const;
    std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const;
    std::optional<std::string> string(const char* name) const;

    // An integer value (5, or 5.0), clamped to int64's range; nullopt for anything else.
    static std::optional<int64_t> as_integer(const nlohmann::ordered_json& v);

  private:
    const nlohmann::ordered_json& o_;
};

// Function tools in OpenAI's form ([{"type": "function", "function": {"name", "description",
// "parameters"}}], at most 128, names unique, 1 to 64 of [A-Za-z0-9_-]), checked; `param` names
// the field in errors ("tools").
nlohmann::ordered_json check_function_tools(const nlohmann::ordered_json& tools);

}  // namespace minfer::server
