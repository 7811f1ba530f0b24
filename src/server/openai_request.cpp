#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "grammar/json_schema.h"
#include "server/api_error.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

// Nesting deeper than this is refused while parsing: nothing in the API nests more than a few
// levels, and deep values would make later recursive walks (templates) costly.
constexpr int kMaxDepth = 64;
constexpr std::size_t kMaxStops = 16;
constexpr std::size_t kMaxStopBytes = 1024;

[[noreturn]] void bad(const std::string& param, const std::string& message) {
    throw ApiError(400, message, param);
}

const char* kind_of(const Json& v) {
    if (v.is_string()) return "a string";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_array()) return "an array";
    if (v.is_object()) return "an object";
    return "null";
}

// Typed access to the fields of a request object; null counts as absent.
class Fields {
  public:
    explicit Fields(const Json& object) : o_(object) {}

    const Json* get(const char* name) const {
        const auto it = o_.find(name);
        return it == o_.end() || it->is_null() ? nullptr : &*it;
    }
    std::optional<bool> boolean(const char* name) const {
        const Json* v = get(name);
        if (v == nullptr) return std::nullopt;
        if (!v->is_boolean())
            bad(name, concat("'", name, "' must be a boolean, got ", kind_of(*v)));
        return v->get<bool>();
    }
    std::optional<double> number(const char* name, double lo, double hi) const {
        const Json* v = get(name);
        if (v == nullptr) return std::nullopt;
        if (!v->is_number()) bad(name, concat("'", name, "' must be a number, got ", kind_of(*v)));
        const double x = v->get<double>();
        if (!(x >= lo && x <= hi))
            bad(name, concat("'", name, "' must be between ", lo, " and ", hi, ", got ", x));
        return x;
    }
    std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const {
        const Json* v = get(name);
        if (v == nullptr) return std::nullopt;
        const auto value = as_integer(*v);
        if (!value) bad(name, concat("'", name, "' must be an integer, got ", kind_of(*v)));
        if (*value < lo || *value > hi)
            bad(name, concat("'", name, "' must be between ", lo, " and ", hi, ", got ", *value));
        return *value;
    }
    std::optional<std::string> string(const char* name) const {
        const Json* v = get(name);
        if (v == nullptr) return std::nullopt;
        if (!v->is_string()) bad(name, concat("'", name, "' must be a string, got ", kind_of(*v)));
        return v->get<std::string>();
    }

    // An integer value (5, or 5.0), clamped to int64's range; nullopt for anything else.
    static std::optional<int64_t> as_integer(const Json& v) {
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

  private:
    const Json& o_;
};

// The sampling and generation fields both endpoints take.
GenerationRequest parse_generation(const Fields& f, const SamplingParams& defaults) {
    GenerationRequest g;
    g.sampling = defaults;
    SamplingParams& s = g.sampling;
    if (auto m = f.string("model")) g.model = *m;
    if (auto v = f.number("temperature", 0, 1e6)) s.temperature = static_cast<float>(*v);
    if (auto v = f.number("top_p", 0, 1)) {
        if (*v <= 0) bad("top_p", "'top_p' must be greater than 0");
        s.top_p = static_cast<float>(*v);
    }
    if (auto v = f.integer("top_k", 0, std::numeric_limits<int32_t>::max()))
        s.top_k = static_cast<int32_t>(*v);
    if (auto v = f.number("min_p", 0, 1)) s.min_p = static_cast<float>(*v);
    if (auto v = f.number("typical_p", 0, 1)) {
        if (*v <= 0) bad("typical_p", "'typical_p' must be greater than 0");
        s.typical_p = static_cast<float>(*v);
    }
    if (auto v = f.number("presence_penalty", -1e6, 1e6))
        s.presence_penalty = static_cast<float>(*v);
    if (auto v = f.number("frequency_penalty", -1e6, 1e6))
        s.frequency_penalty = static_cast<float>(*v);
    if (auto v = f.number("repeat_penalty", 0, 1e6)) {
        if (*v <= 0) bad("repeat_penalty", "'repeat_penalty' must be greater than 0");
        s.repeat_penalty = static_cast<float>(*v);
    }
    if (auto v = f.integer("repeat_last_n", -1, std::numeric_limits<int32_t>::max()))
        s.penalty_last_n = static_cast<int32_t>(*v);
    if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max())) {
        // -1 is llama-server's "random".
        if (*v != -1) {
            s.seed = static_cast<uint64_t>(*v);
            g.seed_given = true;
        }
    }
    if (const Json* bias = f.get("logit_bias")) {
        if (!bias->is_object())
            bad("logit_bias", concat("'logit_bias' must be an object, got ", kind_of(*bias)));
        for (const auto& [key, value] : bias->items()) {
            int64_t id = -1;
            const bool digits = !key.empty() && key.size() <= 10 &&
                                key.find_first_not_of("0123456789") == std::string::npos;
            if (digits) id = std::stoll(key);
            if (!digits || id > std::numeric_limits<int32_t>::max())
                bad("logit_bias", concat("'logit_bias' keys must be token ids, got '", key, "'"));
            if (!value.is_number() || !std::isfinite(value.get<double>()))
                bad("logit_bias", concat("'logit_bias' values must be numbers (token ", key, ")"));
            // OpenAI's scale: -100 bans the token.
            const double b = value.get<double>();
            s.logit_bias[static_cast<int32_t>(id)] =
                b <= -100 ? -std::numeric_limits<float>::infinity() : static_cast<float>(b);
        }
    }
    // max_completion_tokens is the newer name of max_tokens; -1 is llama-server's "unlimited".
    std::optional<int64_t> max_tokens =
        f.integer("max_tokens", -1, std::numeric_limits<int64_t>::max());
    const char* max_name = "max_tokens";
    if (auto v = f.integer("max_completion_tokens", -1, std::numeric_limits<int64_t>::max())) {
        max_tokens = v;
        max_name = "max_completion_tokens";
    }
    if (max_tokens == 0) bad(max_name, concat("'", max_name, "' must be at least 1"));
    if (max_tokens) g.max_tokens = *max_tokens;
    if (const Json* stop = f.get("stop")) {
        if (stop->is_string()) {
            g.stop.push_back(stop->get<std::string>());
        } else if (stop->is_array()) {
            if (stop->size() > kMaxStops)
                bad("stop", concat("'stop' holds at most ", kMaxStops, " strings"));
            for (const Json& s1 : *stop) {
                if (!s1.is_string()) bad("stop", "'stop' must be a string or an array of strings");
                g.stop.push_back(s1.get<std::string>());
            }
        } else {
            bad("stop",
                concat("'stop' must be a string or an array of strings, got ", kind_of(*stop)));
        }
        for (const auto& s1 : g.stop) {
            if (s1.size() > kMaxStopBytes)
                bad("stop", concat("a stop string is longer than ", kMaxStopBytes, " bytes"));
        }
        std::erase_if(g.stop, [](const std::string& s1) { return s1.empty(); });
    }
    if (auto v = f.integer("n", 1, kMaxChoices)) g.n = static_cast<int>(*v);
    if (auto v = f.boolean("stream")) g.stream = *v;
    if (const Json* so = f.get("stream_options")) {
        if (!so->is_object())
            bad("stream_options", concat("'stream_options' must be an object, got ", kind_of(*so)));
        if (auto v = Fields(*so).boolean("include_usage")) g.include_usage = *v;
    }
    if (auto v = f.boolean("ignore_eos")) g.ignore_eos = *v;
    try {
        s.validate();
    } catch (const UsageError& e) {
        bad("", e.what());
    }
    return g;
}

// A message's content: a string, null, or an array of {"type": "text", "text": ...} parts
// (joined by newlines).
Json flatten_content(const Json& content, std::size_t index) {
    const std::string where = concat("messages[", index, "].content");
    if (content.is_null() || content.is_string()) return content;
    if (!content.is_array())
        bad(where,
            concat("'", where, "' must be a string or an array of parts, got ", kind_of(content)));
    std::string text;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const Json& part = content[i];
        const std::string part_name = concat(where, "[", i, "]");
        if (!part.is_object()) bad(part_name, concat("'", part_name, "' must be an object"));
        const auto type = Fields(part).string("type");
        if (type != "text")
            bad(part_name, concat("'", part_name, "' has type '", type.value_or(""),
                                  "': only text parts are supported"));
        const auto t = Fields(part).string("text");
        if (!t) bad(part_name, concat("'", part_name, "' has no 'text'"));
        if (!text.empty()) text += "\n";
        text += *t;
    }
    return text;
}

// response_format and llama-server's `grammar`: the grammar the answer must follow, if any.
void parse_constraint(const Fields& f, GenerationRequest& g) {
    const Json* format = f.get("response_format");
    const auto grammar_text = f.string("grammar");
    if (format != nullptr) {
        if (!format->is_object()) bad("response_format", "'response_format' must be an object");
        const Fields ff(*format);
        const auto type = ff.string("type");
        if (!type) bad("response_format", "'response_format' needs a 'type'");
        try {
            if (*type == "json_object") {
                // llama-server's extension: a schema beside json_object.
                if (const Json* schema = ff.get("schema")) {
                    g.constraint = grammar::parse_gbnf(grammar::json_schema_to_gbnf(*schema));
                } else {
                    g.constraint = grammar::parse_gbnf(grammar::json_object_gbnf());
                }
            } else if (*type == "json_schema") {
                const Json* spec = ff.get("json_schema");
                if (spec == nullptr || !spec->is_object())
                    bad("response_format",
                        "'response_format' of type 'json_schema' needs a 'json_schema' object");
                const Fields sf(*spec);
                sf.string("name");  // type-checked; OpenAI requires it, it changes nothing here
                sf.boolean("strict");
                const Json* schema = sf.get("schema");
                g.constraint = grammar::parse_gbnf(
                    grammar::json_schema_to_gbnf(schema != nullptr ? *schema : Json::object()));
            } else if (*type != "text") {
                bad("response_format",
                    concat("'response_format' has type '", *type,
                           "': it must be 'text', 'json_object' or 'json_schema'"));
            }
        } catch (const UsageError& e) {
            bad("response_format", e.what());
        }
        if (g.constraint) g.constraint_field = "response_format";
    }
    if (grammar_text) {
        if (g.constraint) bad("grammar", "give either 'grammar' or a JSON 'response_format'");
        try {
            g.constraint = grammar::parse_gbnf(*grammar_text);
        } catch (const UsageError& e) {
            bad("grammar", e.what());
        }
        g.constraint_field = "grammar";
    }
}

// OpenAI's tools: [{"type": "function", "function": {"name", "description", "parameters"}}].
Json parse_tools(const Json& tools) {
    if (!tools.is_array()) bad("tools", concat("'tools' must be an array, got ", kind_of(tools)));
    if (tools.size() > 128) bad("tools", "'tools' holds at most 128 functions");
    std::vector<std::string> names;
    for (std::size_t i = 0; i < tools.size(); ++i) {
        const std::string where = concat("tools[", i, "]");
        const Json& t = tools[i];
        if (!t.is_object()) bad("tools", concat("'", where, "' must be an object"));
        if (Fields(t).string("type").value_or("") != "function")
            bad("tools", concat("'", where, ".type' must be 'function'"));
        const Json* fn = Fields(t).get("function");
        if (fn == nullptr || !fn->is_object())
            bad("tools", concat("'", where, ".function' must be an object"));
        const auto name = Fields(*fn).string("name");
        const bool valid = name && !name->empty() && name->size() <= 64 &&
                           name->find_first_not_of(
                               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                               "UVWXYZ0123456789_-") == std::string::npos;
        if (!valid)
            bad("tools",
                concat("'", where, ".function.name' must be 1 to 64 letters, digits, '_' or '-'"));
        if (std::find(names.begin(), names.end(), *name) != names.end())
            bad("tools", concat("two tools are named '", *name, "'"));
        names.push_back(*name);
        Fields(*fn).string("description");
        if (const Json* p = Fields(*fn).get("parameters"); p != nullptr && !p->is_object())
            bad("tools", concat("'", where, ".function.parameters' must be a JSON Schema object"));
    }
    return tools;
}

ToolChoice parse_tool_choice(const Json& choice, const Json& tools) {
    if (choice.is_string()) {
        const auto s = choice.get<std::string>();
        if (s == "none") return {ToolChoice::Kind::None, ""};
        if (s == "auto") return {ToolChoice::Kind::Auto, ""};
        if (s == "required") return {ToolChoice::Kind::Required, ""};
        bad("tool_choice",
            concat("'tool_choice' must be 'none', 'auto', 'required' or an object, got '", s, "'"));
    }
    if (!choice.is_object()) bad("tool_choice", "'tool_choice' must be a string or an object");
    const Json* fn = Fields(choice).get("function");
    const auto name = fn != nullptr && fn->is_object() ? Fields(*fn).string("name") : std::nullopt;
    if (!name)
        bad("tool_choice",
            "'tool_choice' names a function as {\"type\": \"function\", \"function\": {\"name\": "
            "...}}");
    bool found = false;
    for (const Json& t : tools) found = found || t["function"]["name"] == *name;
    if (!found)
        bad("tool_choice", concat("'tool_choice' names '", *name, "', which is not among 'tools'"));
    return {ToolChoice::Kind::Named, *name};
}

Json parse_messages(const Fields& f) {
    const Json* messages = f.get("messages");
    if (messages == nullptr) bad("messages", "'messages' is required");
    if (!messages->is_array())
        bad("messages", concat("'messages' must be an array, got ", kind_of(*messages)));
    if (messages->empty()) bad("messages", "'messages' must hold at least one message");
    Json out = Json::array();
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = concat("messages[", i, "]");
        if (!m.is_object()) bad(where, concat("'", where, "' must be an object, got ", kind_of(m)));
        if (!m.contains("role") || !m.at("role").is_string())
            bad(where + ".role", concat("'", where, ".role' must be a string"));
        Json copy = m;
        copy["content"] = m.contains("content") ? flatten_content(m.at("content"), i) : Json();
        out.push_back(std::move(copy));
    }
    return out;
}

}  // namespace

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
        throw ApiError(400, concat("the request body must be a JSON object, got ", kind_of(doc)));
    return doc;
}

ChatRequest parse_chat_request(std::string_view body, const SamplingParams& defaults,
                               bool with_constraint) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    ChatRequest r;
    r.gen = parse_generation(f, defaults);
    r.messages = parse_messages(f);
    if (auto lp = f.boolean("logprobs"); lp && *lp) r.gen.logprobs = 0;
    if (auto top = f.integer("top_logprobs", 0, kMaxTopLogprobs)) {
        if (r.gen.logprobs < 0) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.gen.logprobs = static_cast<int>(*top);
    }
    if (const Json* tools = f.get("tools")) r.tools = parse_tools(*tools);
    if (const Json* kwargs = f.get("chat_template_kwargs")) {
        if (!kwargs->is_object())
            bad("chat_template_kwargs",
                concat("'chat_template_kwargs' must be an object, got ", kind_of(*kwargs)));
        r.template_kwargs = *kwargs;
    }
    const bool has_tools = r.tools.is_array() && !r.tools.empty();
    r.tool_choice = {has_tools ? ToolChoice::Kind::Auto : ToolChoice::Kind::None, ""};
    if (const Json* choice = f.get("tool_choice")) {
        r.tool_choice = parse_tool_choice(*choice, has_tools ? r.tools : Json::array());
        if (r.tool_choice.kind == ToolChoice::Kind::Required && !has_tools)
            bad("tool_choice", "'tool_choice' is 'required' but there are no 'tools'");
        if (r.tool_choice.kind == ToolChoice::Kind::Auto && !has_tools)
            r.tool_choice.kind = ToolChoice::Kind::None;  // nothing to call: plain text
        r.template_kwargs["tool_choice"] = *choice;
    }
    if (auto v = f.boolean("parallel_tool_calls")) r.parallel_tool_calls = *v;
    if (with_constraint) parse_constraint(f, r.gen);
    if (r.gen.constraint && r.tool_choice.kind != ToolChoice::Kind::None)
        bad(r.gen.constraint_field,
            concat("'", r.gen.constraint_field,
                   "' cannot be combined with tools (unless 'tool_choice' is 'none')"));
    return r;
}

TextCompletionRequest parse_completion_request(std::string_view body,
                                               const SamplingParams& defaults) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    TextCompletionRequest r;
    r.gen = parse_generation(f, defaults);
    const Json* prompt = f.get("prompt");
    if (prompt == nullptr) bad("prompt", "'prompt' is required");
    const auto several = [] { bad("prompt", "one prompt per request: several are not supported"); };
    if (prompt->is_string()) {
        r.prompt_text = prompt->get<std::string>();
    } else if (prompt->is_array()) {
        if (prompt->size() == 1 && (*prompt)[0].is_string()) {
            r.prompt_text = (*prompt)[0].get<std::string>();
        } else {
            for (const Json& t : *prompt) {
                if (t.is_string() || t.is_array()) several();
                const auto id = Fields::as_integer(t);
                if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max())
                    bad("prompt", "'prompt' must be a string or an array of token ids");
                r.prompt_tokens.push_back(static_cast<int32_t>(*id));
            }
            if (r.prompt_tokens.empty()) bad("prompt", "'prompt' holds no token");
        }
    } else {
        bad("prompt",
            concat("'prompt' must be a string or an array of token ids, got ", kind_of(*prompt)));
    }
    if (auto lp = f.integer("logprobs", 0, kMaxLegacyLogprobs))
        r.gen.logprobs = static_cast<int>(*lp);
    if (auto echo = f.boolean("echo"); echo && *echo) bad("echo", "'echo' is not supported");
    if (auto best_of = f.integer("best_of", 1, kMaxChoices); best_of && *best_of > 1)
        bad("best_of", "'best_of' above 1 is not supported");
    if (f.get("suffix") != nullptr) bad("suffix", "'suffix' is not supported");
    parse_constraint(f, r.gen);
    return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    TokenizeRequest r;
    const auto content = f.string("content");
    if (!content) bad("content", "'content' must be a string");
    r.content = *content;
    if (auto v = f.boolean("add_special")) r.add_special = *v;
    if (auto v = f.boolean("parse_special")) r.parse_special = *v;
    if (auto v = f.boolean("with_pieces")) r.with_pieces = *v;
    return r;
}

std::vector<int32_t> parse_detokenize_request(std::string_view body, int64_t n_vocab) {
    const Json doc = parse_json_object(body);
    const Json* tokens = Fields(doc).get("tokens");
    if (tokens == nullptr || !tokens->is_array())
        bad("tokens", "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const Json& t : *tokens) {
        const auto id = Fields::as_integer(t);
        if (!id || *id < 0 || *id >= n_vocab)
            bad("tokens", concat("'tokens' must hold ids below ", n_vocab));
        ids.push_back(static_cast<int32_t>(*id));
    }
    return ids;
}

}  // namespace minfer::server
