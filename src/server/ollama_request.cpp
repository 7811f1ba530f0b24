#include "server/ollama_request.h"

#include <limits>

#include "grammar/json_schema.h"
#include "server/api_error.h"
#include "server/keep_alive.h"
#include "server/request_fields.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

// options: the sampling fields; the server's own settings are ignored, as ollama ignores options
// a model does not use.
void parse_options(const Fields& f, GenerationRequest& g) {
    const Json* options = f.get("options");
    if (options == nullptr) return;
    if (!options->is_object())
        bad_field("options", concat("'options' must be an object, got ", json_kind(*options)));
    const Fields o(*options);
    SamplingParams& s = g.sampling;
    if (auto v = o.number("temperature", 0, 1e6)) s.temperature = static_cast<float>(*v);
    if (auto v = o.integer("top_k", 0, std::numeric_limits<int32_t>::max()))
        s.top_k = static_cast<int32_t>(*v);
    if (auto v = o.number("top_p", 0, 1)) s.top_p = static_cast<float>(*v > 0 ? *v : 1);
    if (auto v = o.number("min_p", 0, 1)) s.min_p = static_cast<float>(*v);
    if (auto v = o.number("typical_p", 0, 1)) s.typical_p = static_cast<float>(*v > 0 ? *v : 1);
    if (auto v = o.number("repeat_penalty", 0, 1e6))
        s.repeat_penalty = static_cast<float>(*v > 0 ? *v : 1);
    if (auto v = o.integer("repeat_last_n", -1, std::numeric_limits<int32_t>::max()))
        s.penalty_last_n = static_cast<int32_t>(*v);
    if (auto v = o.number("presence_penalty", -1e6, 1e6))
        s.presence_penalty = static_cast<float>(*v);
    if (auto v = o.number("frequency_penalty", -1e6, 1e6))
        s.frequency_penalty = static_cast<float>(*v);
    if (auto v = o.integer("seed", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max())) {
        s.seed = static_cast<uint64_t>(*v);
        g.seed_given = true;
    }
    // num_predict: -1 until the end, -2 until the context is full (the same here).
    if (auto v = o.integer("num_predict", -2, std::numeric_limits<int64_t>::max()))
        g.max_tokens = *v == 0 ? 1 : *v < 0 ? std::numeric_limits<int64_t>::max() : *v;
    if (const Json* stop = o.get("stop")) {
        if (!stop->is_array())
            bad_field("options.stop", "'options.stop' must be an array of strings");
        if (stop->size() > kMaxStops)
            bad_field("options.stop",
                      concat("'options.stop' holds at most ", kMaxStops, " strings"));
        for (const Json& s1 : *stop) {
            if (!s1.is_string() || s1.get_ref<const std::string&>().size() > kMaxStopBytes)
                bad_field("options.stop", concat("'options.stop' must hold strings of at most ",
                                                 kMaxStopBytes, " bytes"));
            if (!s1.get_ref<const std::string&>().empty()) g.stop.push_back(s1.get<std::string>());
        }
    }
    // The server's settings, per request in ollama: checked for their type, not applied.
    for (const char* name :
         {"num_ctx", "num_keep", "num_batch", "num_thread", "num_gpu", "main_gpu"})
        o.integer(name, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
    try {
        s.validate();
    } catch (const UsageError& e) {
        bad_field("options", e.what());
    }
}

// format: "json", or a JSON schema the answer must follow.
void parse_format(const Fields& f, GenerationRequest& g) {
    const Json* format = f.get("format");
    if (format == nullptr) return;
    try {
        if (format->is_string()) {
            const auto& name = format->get_ref<const std::string&>();
            if (name.empty()) return;
            if (name != "json")
                bad_field("format",
                          concat("'format' must be \"json\" or a JSON schema, got '", name, "'"));
            g.constraint = grammar::parse_gbnf(grammar::json_object_gbnf());
        } else if (format->is_object()) {
            g.constraint = grammar::parse_gbnf(grammar::json_schema_to_gbnf(*format));
        } else {
            bad_field("format", concat("'format' must be \"json\" or a JSON schema, got ",
                                       json_kind(*format)));
        }
    } catch (const UsageError& e) {
        bad_field("format", e.what());
    }
    g.constraint_field = "format";
}

// think: true, false, or an effort ("high", "medium", "low": thinking on).
void parse_think(const Fields& f, ChatInput& chat) {
    const Json* think = f.get("think");
    if (think == nullptr) return;
    if (think->is_boolean()) {
        chat.template_kwargs["enable_thinking"] = think->get<bool>();
        return;
    }
    const std::string effort = think->is_string() ? think->get<std::string>() : "";
    if (effort != "high" && effort != "medium" && effort != "low")
        bad_field("think", "'think' must be true, false, \"high\", \"medium\" or \"low\"");
    chat.template_kwargs["enable_thinking"] = true;
}

void refuse_images(const Fields& f, const std::string& where) {
    if (const Json* images = f.get("images");
        images != nullptr && !(images->is_array() && images->empty()))
        bad_field(where,
                  concat("'", where,
                         "' holds images: minfer serves text models, which cannot read them"));
}

// ollama's messages: OpenAI's, but tool calls' arguments are objects, and tool results may name
// their tool (tool_name).
Json parse_messages(const Fields& f) {
    const Json* messages = f.get("messages");
    Json out = Json::array();
    if (messages == nullptr) return out;  // (an empty chat loads the model)
    if (!messages->is_array())
        bad_field("messages", concat("'messages' must be an array, got ", json_kind(*messages)));
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = concat("messages[", i, "]");
        if (!m.is_object())
            bad_field(where, concat("'", where, "' must be an object, got ", json_kind(m)));
        const Fields mf(m);
        const auto role = mf.string("role");
        if (!role ||
            (*role != "system" && *role != "user" && *role != "assistant" && *role != "tool"))
            bad_field(where + ".role",
                      concat("'", where, ".role' must be system, user, assistant or tool"));
        refuse_images(mf, where + ".images");
        Json message = {{"role", *role}, {"content", mf.string("content").value_or("")}};
        if (auto name = mf.string("tool_name")) message["tool_name"] = *name;
        if (const Json* calls = mf.get("tool_calls")) {
            if (!calls->is_array())
                bad_field(where + ".tool_calls",
                          concat("'", where, ".tool_calls' must be an array"));
            Json converted = Json::array();
            for (const Json& call : *calls) {
                const Json* fn = call.is_object() ? Fields(call).get("function") : nullptr;
                if (fn == nullptr || !fn->is_object() || !Fields(*fn).string("name"))
                    bad_field(
                        where + ".tool_calls",
                        concat("'", where, ".tool_calls' entries need a function with a name"));
                const Json* args = Fields(*fn).get("arguments");
                if (args != nullptr && !args->is_object())
                    bad_field(where + ".tool_calls",
                              concat("'", where, ".tool_calls' arguments must be objects"));
                converted.push_back({{"type", "function"},
                                     {"function",
                                      {{"name", (*fn)["name"]},
                                       {"arguments", (args ? *args : Json::object()).dump()}}}});
            }
            message["tool_calls"] = std::move(converted);
        }
        if (auto thinking = mf.string("thinking")) message["reasoning_content"] = *thinking;
        out.push_back(std::move(message));
    }
    return out;
}

GenerationRequest common(const Fields& f, const SamplingParams& defaults) {
    GenerationRequest g;
    g.sampling = defaults;
    const auto model = f.string("model");
    if (!model || model->empty()) bad_field("model", "'model' is required");
    g.model = *model;
    g.stream = f.boolean("stream").value_or(true);
    if (const Json* keep = f.get("keep_alive"); keep && !keep->is_null())
        g.keep_alive = keep_alive_from_json(*keep);
    parse_options(f, g);
    parse_format(f, g);
    return g;
}

}  // namespace

GenerationRequest parse_ollama_chat(std::string_view body, const SamplingParams& defaults) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    GenerationRequest g = common(f, defaults);
    ChatInput chat;
    chat.messages = parse_messages(f);
    if (const Json* tools = f.get("tools")) chat.tools = check_function_tools(*tools);
    const bool has_tools = chat.tools.is_array() && !chat.tools.empty();
    chat.tool_choice = {has_tools ? ToolChoice::Kind::Auto : ToolChoice::Kind::None, ""};
    if (g.constraint && has_tools) bad_field("format", "'format' cannot be combined with 'tools'");
    parse_think(f, chat);
    g.input = std::move(chat);
    return g;
}

GenerationRequest parse_ollama_generate(std::string_view body, const SamplingParams& defaults) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    GenerationRequest g = common(f, defaults);
    refuse_images(f, "images");
    if (auto suffix = f.string("suffix"); suffix && !suffix->empty())
        bad_field("suffix", "'suffix' is not supported: minfer has no fill-in-the-middle yet");
    if (f.get("template") != nullptr)
        bad_field("template", "'template' is not supported: the model's chat template is used");
    const std::string prompt = f.string("prompt").value_or("");
    const auto system = f.string("system");
    if (f.boolean("raw").value_or(false)) {
        PromptInput input;
        input.text = prompt;
        g.input = std::move(input);
        return g;
    }
    ChatInput chat;
    chat.tool_choice = {ToolChoice::Kind::None, ""};
    if (system) chat.messages.push_back({{"role", "system"}, {"content", *system}});
    if (!prompt.empty()) chat.messages.push_back({{"role", "user"}, {"content", prompt}});
    parse_think(f, chat);
    g.input = std::move(chat);
    return g;
}

}  // namespace minfer::server
