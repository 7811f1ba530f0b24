#include "server/openai_request.h"

#include <cmath>
#include <limits>

#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

// The sampling and generation fields both endpoints take.
GenerationRequest parse_generation(const Fields& f, const SamplingParams& defaults) {
    GenerationRequest g;
    g.sampling = defaults;
    SamplingParams& s = g.sampling;
    if (auto m = f.string("model")) g.model = *m;
    if (auto v = f.number("temperature", 0, 1e6)) s.temperature = static_cast<float>(*v);
    if (auto v = f.number("top_p", 0, 1)) {
        if (*v <= 0) bad_field("top_p", "'top_p' must be greater than 0");
        s.top_p = static_cast<float>(*v);
    }
    if (auto v = f.integer("top_k", 0, std::numeric_limits<int32_t>::max()))
        s.top_k = static_cast<int32_t>(*v);
    if (auto v = f.number("min_p", 0, 1)) s.min_p = static_cast<float>(*v);
    if (auto v = f.number("typical_p", 0, 1)) {
        if (*v <= 0) bad_field("typical_p", "'typical_p' must be greater than 0");
        s.typical_p = static_cast<float>(*v);
    }
    if (auto v = f.number("presence_penalty", -1e6, 1e6))
        s.presence_penalty = static_cast<float>(*v);
    if (auto v = f.number("frequency_penalty", -1e6, 1e6))
        s.frequency_penalty = static_cast<float>(*v);
    if (auto v = f.number("repeat_penalty", 0, 1e6)) {
        if (*v <= 0) bad_field("repeat_penalty", "'repeat_penalty' must be greater than 0");
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
            bad_field("logit_bias",
                      concat("'logit_bias' must be an object, got ", json_kind(*bias)));
        for (const auto& [key, value] : bias->items()) {
            int64_t id = -1;
            const bool digits = !key.empty() && key.size() <= 10 &&
                                key.find_first_not_of("0123456789") == std::string::npos;
            if (digits) id = std::stoll(key);
            if (!digits || id > std::numeric_limits<int32_t>::max())
                bad_field("logit_bias",
                          concat("'logit_bias' keys must be token ids, got '", key, "'"));
            if (!value.is_number() || !std::isfinite(value.get<double>()))
                bad_field("logit_bias",
                          concat("'logit_bias' values must be numbers (token ", key, ")"));
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
    if (max_tokens == 0) bad_field(max_name, concat("'", max_name, "' must be at least 1"));
    if (max_tokens) g.max_tokens = *max_tokens;
    if (const Json* stop = f.get("stop")) {
        if (stop->is_string()) {
            g.stop.push_back(stop->get<std::string>());
        } else if (stop->is_array()) {
            if (stop->size() > kMaxStops)
                bad_field("stop", concat("'stop' holds at most ", kMaxStops, " strings"));
            for (const Json& s1 : *stop) {
                if (!s1.is_string())
                    bad_field("stop", "'stop' must be a string or an array of strings");
                g.stop.push_back(s1.get<std::string>());
            }
        } else {
            bad_field("stop", concat("'stop' must be a string or an array of strings, got ",
                                     json_kind(*stop)));
        }
        for (const auto& s1 : g.stop) {
            if (s1.size() > kMaxStopBytes)
                bad_field("stop", concat("a stop string is longer than ", kMaxStopBytes, " bytes"));
        }
        std::erase_if(g.stop, [](const std::string& s1) { return s1.empty(); });
    }
    if (auto v = f.integer("n", 1, kMaxChoices)) g.n = static_cast<int>(*v);
    if (auto v = f.boolean("stream")) g.stream = *v;
    if (const Json* so = f.get("stream_options")) {
        if (!so->is_object())
            bad_field("stream_options",
                      concat("'stream_options' must be an object, got ", json_kind(*so)));
        if (auto v = Fields(*so).boolean("include_usage")) g.include_usage = *v;
    }
    if (auto v = f.boolean("ignore_eos")) g.ignore_eos = *v;
    try {
        s.validate();
    } catch (const UsageError& e) {
        bad_field("", e.what());
    }
    return g;
}

// A message's content: a string, null, or an array of {"type": "text", "text": ...} parts
// (joined by newlines).
Json flatten_content(const Json& content, std::size_t index) {
    const std::string where = concat("messages[", index, "].content");
    if (content.is_null() || content.is_string()) return content;
    if (!content.is_array())
        bad_field(where, concat("'", where, "' must be a string or an array of parts, got ",
                                json_kind(content)));
    std::string text;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const Json& part = content[i];
        const std::string part_name = concat(where, "[", i, "]");
        if (!part.is_object()) bad_field(part_name, concat("'", part_name, "' must be an object"));
        const auto type = Fields(part).string("type");
        if (type != "text")
            bad_field(part_name, concat("'", part_name, "' has type '", type.value_or(""),
                                        "': only text parts are supported"));
        const auto t = Fields(part).string("text");
        if (!t) bad_field(part_name, concat("'", part_name, "' has no 'text'"));
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
        if (!format->is_object())
            bad_field("response_format", "'response_format' must be an object");
        const Fields ff(*format);
        const auto type = ff.string("type");
        if (!type) bad_field("response_format", "'response_format' needs a 'type'");
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
                    bad_field(
                        "response_format",
                        "'response_format' of type 'json_schema' needs a 'json_schema' object");
                const Fields sf(*spec);
                sf.string("name");  // type-checked; OpenAI requires it, it changes nothing here
                sf.boolean("strict");
                const Json* schema = sf.get("schema");
                g.constraint = grammar::parse_gbnf(
                    grammar::json_schema_to_gbnf(schema != nullptr ? *schema : Json::object()));
            } else if (*type != "text") {
                bad_field("response_format",
                          concat("'response_format' has type '", *type,
                                 "': it must be 'text', 'json_object' or 'json_schema'"));
            }
        } catch (const UsageError& e) {
            bad_field("response_format", e.what());
        }
        if (g.constraint) g.constraint_field = "response_format";
    }
    if (grammar_text) {
        if (g.constraint) bad_field("grammar", "give either 'grammar' or a JSON 'response_format'");
        try {
            g.constraint = grammar::parse_gbnf(*grammar_text);
        } catch (const UsageError& e) {
            bad_field("grammar", e.what());
        }
        g.constraint_field = "grammar";
    }
}

ToolChoice parse_tool_choice(const Json& choice, const Json& tools) {
    if (choice.is_string()) {
        const auto s = choice.get<std::string>();
        if (s == "none") return {ToolChoice::Kind::None, ""};
        if (s == "auto") return {ToolChoice::Kind::Auto, ""};
        if (s == "required") return {ToolChoice::Kind::Required, ""};
        bad_field(
            "tool_choice",
            concat("'tool_choice' must be 'none', 'auto', 'required' or an object, got '", s, "'"));
    }
    if (!choice.is_object())
        bad_field("tool_choice", "'tool_choice' must be a string or an object");
    const Json* fn = Fields(choice).get("function");
    const auto name = fn != nullptr && fn->is_object() ? Fields(*fn).string("name") : std::nullopt;
    if (!name)
        bad_field(
            "tool_choice",
            "'tool_choice' names a function as {\"type\": \"function\", \"function\": {\"name\": "
            "...}}");
    bool found = false;
    for (const Json& t : tools) found = found || t["function"]["name"] == *name;
    if (!found)
        bad_field("tool_choice",
                  concat("'tool_choice' names '", *name, "', which is not among 'tools'"));
    return {ToolChoice::Kind::Named, *name};
}

Json parse_messages(const Fields& f) {
    const Json* messages = f.get("messages");
    if (messages == nullptr) bad_field("messages", "'messages' is required");
    if (!messages->is_array())
        bad_field("messages", concat("'messages' must be an array, got ", json_kind(*messages)));
    if (messages->empty()) bad_field("messages", "'messages' must hold at least one message");
    Json out = Json::array();
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = concat("messages[", i, "]");
        if (!m.is_object())
            bad_field(where, concat("'", where, "' must be an object, got ", json_kind(m)));
        if (!m.contains("role") || !m.at("role").is_string())
            bad_field(where + ".role", concat("'", where, ".role' must be a string"));
        Json copy = m;
        copy["content"] = m.contains("content") ? flatten_content(m.at("content"), i) : Json();
        out.push_back(std::move(copy));
    }
    return out;
}

}  // namespace

GenerationRequest parse_chat_request(std::string_view body, const SamplingParams& defaults,
                                     bool with_constraint) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    GenerationRequest r = parse_generation(f, defaults);
    ChatInput chat;
    chat.messages = parse_messages(f);
    if (auto lp = f.boolean("logprobs"); lp && *lp) r.logprobs = 0;
    if (auto top = f.integer("top_logprobs", 0, kMaxTopLogprobs)) {
        if (r.logprobs < 0) bad_field("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        r.logprobs = static_cast<int>(*top);
    }
    if (const Json* tools = f.get("tools")) chat.tools = check_function_tools(*tools);
    if (const Json* kwargs = f.get("chat_template_kwargs")) {
        if (!kwargs->is_object())
            bad_field("chat_template_kwargs",
                      concat("'chat_template_kwargs' must be an object, got ", json_kind(*kwargs)));
        chat.template_kwargs = *kwargs;
    }
    const bool has_tools = chat.tools.is_array() && !chat.tools.empty();
    chat.tool_choice = {has_tools ? ToolChoice::Kind::Auto : ToolChoice::Kind::None, ""};
    if (const Json* choice = f.get("tool_choice")) {
        chat.tool_choice = parse_tool_choice(*choice, has_tools ? chat.tools : Json::array());
        if (chat.tool_choice.kind == ToolChoice::Kind::Required && !has_tools)
            bad_field("tool_choice", "'tool_choice' is 'required' but there are no 'tools'");
        if (chat.tool_choice.kind == ToolChoice::Kind::Auto && !has_tools)
            chat.tool_choice.kind = ToolChoice::Kind::None;  // nothing to call: plain text
        chat.template_kwargs["tool_choice"] = *choice;
    }
    if (auto v = f.boolean("parallel_tool_calls")) chat.parallel_tool_calls = *v;
    if (with_constraint) parse_constraint(f, r);
    if (r.constraint && chat.tool_choice.kind != ToolChoice::Kind::None)
        bad_field(r.constraint_field,
                  concat("'", r.constraint_field,
                         "' cannot be combined with tools (unless 'tool_choice' is 'none')"));
    r.input = std::move(chat);
    return r;
}

GenerationRequest parse_completion_request(std::string_view body, const SamplingParams& defaults) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    GenerationRequest r = parse_generation(f, defaults);
    PromptInput input;
    const Json* prompt = f.get("prompt");
    if (prompt == nullptr) bad_field("prompt", "'prompt' is required");
    const auto several = [] {
        bad_field("prompt", "one prompt per request: several are not supported");
    };
    if (prompt->is_string()) {
        input.text = prompt->get<std::string>();
    } else if (prompt->is_array()) {
        if (prompt->size() == 1 && (*prompt)[0].is_string()) {
            input.text = (*prompt)[0].get<std::string>();
        } else {
            for (const Json& t : *prompt) {
                if (t.is_string() || t.is_array()) several();
                const auto id = Fields::as_integer(t);
                if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max())
                    bad_field("prompt", "'prompt' must be a string or an array of token ids");
                input.tokens.push_back(static_cast<int32_t>(*id));
            }
            if (input.tokens.empty()) bad_field("prompt", "'prompt' holds no token");
        }
    } else {
        bad_field("prompt", concat("'prompt' must be a string or an array of token ids, got ",
                                   json_kind(*prompt)));
    }
    if (auto lp = f.integer("logprobs", 0, kMaxLegacyLogprobs)) r.logprobs = static_cast<int>(*lp);
    if (auto echo = f.boolean("echo"); echo && *echo) bad_field("echo", "'echo' is not supported");
    if (auto best_of = f.integer("best_of", 1, kMaxChoices); best_of && *best_of > 1)
        bad_field("best_of", "'best_of' above 1 is not supported");
    if (f.get("suffix") != nullptr) bad_field("suffix", "'suffix' is not supported");
    parse_constraint(f, r);
    r.input = std::move(input);
    return r;
}

TokenizeRequest parse_tokenize_request(std::string_view body) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    TokenizeRequest r;
    const auto content = f.string("content");
    if (!content) bad_field("content", "'content' must be a string");
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
        bad_field("tokens", "'tokens' must be an array of token ids");
    std::vector<int32_t> ids;
    for (const Json& t : *tokens) {
        const auto id = Fields::as_integer(t);
        if (!id || *id < 0 || *id >= n_vocab)
            bad_field("tokens", concat("'tokens' must hold ids below ", n_vocab));
        ids.push_back(static_cast<int32_t>(*id));
    }
    return ids;
}

}  // namespace minfer::server
