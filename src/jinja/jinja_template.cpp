#include "jinja/jinja_template.h"

#include "jinja/jinja_parser.h"

namespace minfer::jinja {

Template Template::parse(std::string_view source) {
    Template t;
    t.body_ = std::make_shared<const Body>(parse_template(source));
    return t;
}

std::string Template::render(const Dict& variables, const RenderOptions& options) const {
    Interpreter interpreter(options, variables);
    try {
        return interpreter.render(*body_);
    } catch (const TemplateError&) {
        throw;
    } catch (const EvalError& e) {  // outside any statement (cannot normally happen)
        throw TemplateError(e.what());
    }
}

namespace {

constexpr int kMaxJsonDepth = 512;

Value convert(const nlohmann::ordered_json& json, int depth) {
    if (depth > kMaxJsonDepth)
        throw FormatError(concat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
    switch (json.type()) {
        case nlohmann::ordered_json::value_t::null:
        case nlohmann::ordered_json::value_t::discarded:
            return Value::none();
        case nlohmann::ordered_json::value_t::boolean:
            return Value::boolean(json.get<bool>());
        case nlohmann::ordered_json::value_t::number_integer:
            return Value::integer(json.get<int64_t>());
        case nlohmann::ordered_json::value_t::number_unsigned: {
            const auto u = json.get<uint64_t>();
            if (u <= static_cast<uint64_t>(INT64_MAX))
                return Value::integer(static_cast<int64_t>(u));
            return Value::number(static_cast<double>(u));
        }
        case nlohmann::ordered_json::value_t::number_float:
            return Value::number(json.get<double>());
        case nlohmann::ordered_json::value_t::string:
            return Value::string(json.get_ref<const std::string&>());
        case nlohmann::ordered_json::value_t::array: {
            std::vector<Value> items;
            items.reserve(json.size());
            for (const auto& item : json) items.push_back(convert(item, depth + 1));
            return Value::list(std::move(items));
        }
        case nlohmann::ordered_json::value_t::object: {
            Dict d;
            for (const auto& [key, value] : json.items())
                d.set(Value::string(key), convert(value, depth + 1));
            return Value::dict(std::move(d));
        }
        case nlohmann::ordered_json::value_t::binary:
            break;
    }
    throw FormatError("binary JSON values cannot be passed to a template");
}

}  // namespace

Value value_from_json(const nlohmann::ordered_json& json) {
    return convert(json, 0);
}

}  // namespace minfer::jinja
