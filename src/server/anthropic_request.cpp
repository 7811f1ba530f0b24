#include "server/anthropic_request.h"

#include <limits>

#include "server/api_error.h"
#include "server/request_fields.h"

namespace minfer::server {
namespace {

using Json = nlohmann::ordered_json;

// A content block's type (the block must be an object).
std::string block_type(const Json& block, const std::string& name) {
    if (!block.is_object()) bad_field(name, concat("'", name, "' must be an object"));
    return Fields(block).string("type").value_or("");
}

// A text block's text.
std::string block_text(const Json& block, const std::string& name) {
    const auto t = Fields(block).string("text");
    if (!t) bad_field(name, concat("'", name, "' has no 'text'"));
    return *t;
}

void append_text(std::string& text, const std::string& more) {
    if (!text.empty() && !more.empty()) text += "\n";
    text += more;
}

// The text of a text-only field: a string, or an array of {"type": "text", "text"} blocks
// (joined by newlines).
std::string text_of(const Json& value, const std::string& where) {
    if (value.is_string()) return value.get<std::string>();
    if (!value.is_array())
        bad_field(where, concat("'", where, "' must be a string or an array of text blocks, got ",
                                json_kind(value)));
    std::string text;
    for (std::size_t i = 0; i < value.size(); ++i) {
        const std::string name = concat(where, "[", i, "]");
        const std::string type = block_type(value[i], name);
        if (type != "text")
            bad_field(name, concat("'", name, "' has type '", type,
                                   "': only text blocks are supported here"));
        append_text(text, block_text(value[i], name));
    }
    return text;
}

[[noreturn]] void unsupported_block(const std::string& where, const std::string& type) {
    if (type == "image" || type == "document")
        bad_field(where, concat("'", where, "' is an ", type,
                                " block: minfer serves text models, which cannot read it"));
    bad_field(where, concat("'", where, "' has type '", type, "', which is not supported here"));
}

// One user message: its tool results (first, as Anthropic requires them) become "tool"
// messages, its text a "user" message.
void add_user_message(const Json& content, const std::string& where, Json& out) {
    if (content.is_string()) {
        out.push_back({{"role", "user"}, {"content", content}});
        return;
    }
    std::string text;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const Json& block = content[i];
        const std::string name = concat(where, "[", i, "]");
        const std::string type = block_type(block, name);
        const Fields f(block);
        if (type == "text") {
            append_text(text, block_text(block, name));
        } else if (type == "tool_result") {
            const auto id = f.string("tool_use_id");
            if (!id || id->empty()) bad_field(name, concat("'", name, "' needs a 'tool_use_id'"));
            const Json* result = f.get("content");
            std::string result_text =
                result == nullptr ? "" : text_of(*result, concat(name, ".content"));
            if (f.boolean("is_error").value_or(false)) result_text = "Error: " + result_text;
            out.push_back({{"role", "tool"}, {"tool_call_id", *id}, {"content", result_text}});
        } else {
            unsupported_block(name, type);
        }
    }
    if (!text.empty()) out.push_back({{"role", "user"}, {"content", text}});
}

// One assistant message: text, and tool_use blocks as OpenAI's tool_calls (arguments as text).
Json assistant_message(const Json& content, const std::string& where) {
    if (content.is_string()) return {{"role", "assistant"}, {"content", content}};
    std::string text;
    Json calls = Json::array();
    for (std::size_t i = 0; i < content.size(); ++i) {
        const Json& block = content[i];
        const std::string name = concat(where, "[", i, "]");
        const std::string type = block_type(block, name);
        const Fields f(block);
        if (type == "text") {
            append_text(text, block_text(block, name));
        } else if (type == "tool_use") {
            const auto id = f.string("id");
            const auto tool = f.string("name");
            const Json* input = f.get("input");
            if (!id || !tool) bad_field(name, concat("'", name, "' needs an 'id' and a 'name'"));
            if (input != nullptr && !input->is_object())
                bad_field(name, concat("'", name, ".input' must be an object"));
            calls.push_back(
                {{"id", *id},
                 {"type", "function"},
                 {"function",
                  {{"name", *tool}, {"arguments", (input ? *input : Json::object()).dump()}}}});
        } else if (type == "thinking" || type == "redacted_thinking") {
            // Earlier reasoning: templates leave it out of the prompt.
        } else {
            unsupported_block(name, type);
        }
    }
    Json message = {{"role", "assistant"}, {"content", text}};
    if (!calls.empty()) message["tool_calls"] = std::move(calls);
    return message;
}

Json parse_conversation(const Fields& f, std::string& prefill) {
    Json out = Json::array();
    if (const Json* system = f.get("system"))
        out.push_back({{"role", "system"}, {"content", text_of(*system, "system")}});
    const Json* messages = f.get("messages");
    if (messages == nullptr) bad_field("messages", "'messages' is required");
    if (!messages->is_array())
        bad_field("messages", concat("'messages' must be an array, got ", json_kind(*messages)));
    if (messages->empty()) bad_field("messages", "'messages' must hold at least one message");
    for (std::size_t i = 0; i < messages->size(); ++i) {
        const Json& m = (*messages)[i];
        const std::string where = concat("messages[", i, "]");
        if (!m.is_object())
            bad_field(where, concat("'", where, "' must be an object, got ", json_kind(m)));
        const Fields mf(m);
        const auto role = mf.string("role");
        const Json* content = mf.get("content");
        if (content == nullptr || !(content->is_string() || content->is_array()))
            bad_field(where + ".content",
                      concat("'", where, ".content' must be a string or an array of blocks"));
        if (role == "user") {
            add_user_message(*content, where + ".content", out);
        } else if (role == "assistant") {
            Json message = assistant_message(*content, where + ".content");
            const bool last = i + 1 == messages->size();
            if (last && !message.contains("tool_calls")) {
                prefill = message["content"].get<std::string>();
            } else {
                out.push_back(std::move(message));
            }
        } else {
            bad_field(where + ".role", concat("'", where, ".role' must be 'user' or 'assistant'"));
        }
    }
    return out;
}

// Anthropic's tools ([{"name", "description", "input_schema"}]) in OpenAI's form, checked there.
Json parse_tools(const Json& tools) {
    if (!tools.is_array())
        bad_field("tools", concat("'tools' must be an array, got ", json_kind(tools)));
    Json out = Json::array();
    for (std::size_t i = 0; i < tools.size(); ++i) {
        const Json& t = tools[i];
        const std::string where = concat("tools[", i, "]");
        if (!t.is_object()) bad_field("tools", concat("'", where, "' must be an object"));
        const Fields f(t);
        const std::string type = f.string("type").value_or("custom");
        if (type != "custom")
            bad_field("tools", concat("'", where, "' is a server tool ('", type,
                                      "'): only client tools (name, input_schema) are supported"));
        const Json* schema = f.get("input_schema");
        if (schema == nullptr || !schema->is_object())
            bad_field("tools", concat("'", where, ".input_schema' must be a JSON Schema object"));
        Json fn = {{"name", t.value("name", Json())}, {"parameters", *schema}};
        if (auto d = f.string("description")) fn["description"] = *d;
        out.push_back({{"type", "function"}, {"function", std::move(fn)}});
    }
    return check_function_tools(out);
}

void parse_tool_choice(const Fields& f, ChatInput& chat) {
    const bool has_tools = chat.tools.is_array() && !chat.tools.empty();
    chat.tool_choice = {has_tools ? ToolChoice::Kind::Auto : ToolChoice::Kind::None, ""};
    const Json* choice = f.get("tool_choice");
    if (choice == nullptr) return;
    if (!choice->is_object())
        bad_field("tool_choice",
                  concat("'tool_choice' must be an object, got ", json_kind(*choice)));
    const Fields cf(*choice);
    const std::string type = cf.string("type").value_or("");
    if (cf.boolean("disable_parallel_tool_use").value_or(false)) chat.parallel_tool_calls = false;
    if (type == "none") {
        chat.tool_choice.kind = ToolChoice::Kind::None;
    } else if (type == "auto") {
        // (auto without tools: plain text)
    } else if (type == "any" || type == "tool") {
        if (!has_tools)
            bad_field("tool_choice",
                      concat("'tool_choice' is '", type, "' but there are no 'tools'"));
        chat.tool_choice.kind = ToolChoice::Kind::Required;
        if (type == "tool") {
            const auto name = cf.string("name");
            bool found = false;
            for (const Json& t : chat.tools)
                found = found || (name && t["function"]["name"] == *name);
            if (!found)
                bad_field("tool_choice", concat("'tool_choice' names '", name.value_or(""),
                                                "', which is not among 'tools'"));
            chat.tool_choice = {ToolChoice::Kind::Named, *name};
        }
    } else {
        bad_field(
            "tool_choice",
            concat("'tool_choice.type' must be 'auto', 'any', 'tool' or 'none', got '", type, "'"));
    }
    // Templates that read tool_choice see OpenAI's values.
    const char* openai = chat.tool_choice.kind == ToolChoice::Kind::None   ? "none"
                         : chat.tool_choice.kind == ToolChoice::Kind::Auto ? "auto"
                                                                           : "required";
    chat.template_kwargs["tool_choice"] = openai;
}

void parse_thinking(const Fields& f, ChatInput& chat) {
    const Json* thinking = f.get("thinking");
    if (thinking == nullptr) return;
    if (!thinking->is_object())
        bad_field("thinking", concat("'thinking' must be an object, got ", json_kind(*thinking)));
    const Fields tf(*thinking);
    const std::string type = tf.string("type").value_or("");
    if (type == "enabled") {
        tf.integer("budget_tokens", 1, std::numeric_limits<int64_t>::max());
        chat.template_kwargs["enable_thinking"] = true;
    } else if (type == "disabled") {
        chat.template_kwargs["enable_thinking"] = false;
    } else {
        bad_field("thinking",
                  concat("'thinking.type' must be 'enabled' or 'disabled', got '", type, "'"));
    }
}

void parse_sampling(const Fields& f, GenerationRequest& g) {
    SamplingParams& s = g.sampling;
    if (auto v = f.number("temperature", 0, 1)) s.temperature = static_cast<float>(*v);
    if (auto v = f.number("top_p", 0, 1)) {
        if (*v <= 0) bad_field("top_p", "'top_p' must be greater than 0");
        s.top_p = static_cast<float>(*v);
    }
    if (auto v = f.integer("top_k", 0, std::numeric_limits<int32_t>::max()))
        s.top_k = static_cast<int32_t>(*v);
    if (const Json* stops = f.get("stop_sequences")) {
        if (!stops->is_array())
            bad_field("stop_sequences", concat("'stop_sequences' must be an array of strings, got ",
                                               json_kind(*stops)));
        if (stops->size() > kMaxStops)
            bad_field("stop_sequences",
                      concat("'stop_sequences' holds at most ", kMaxStops, " strings"));
        for (const Json& s1 : *stops) {
            if (!s1.is_string())
                bad_field("stop_sequences", "'stop_sequences' must be an array of strings");
            const auto text = s1.get<std::string>();
            if (text.size() > kMaxStopBytes)
                bad_field("stop_sequences",
                          concat("a stop sequence is longer than ", kMaxStopBytes, " bytes"));
            if (!text.empty()) g.stop.push_back(text);
        }
    }
    try {
        s.validate();
    } catch (const UsageError& e) {
        bad_field("", e.what());
    }
}

}  // namespace

GenerationRequest parse_messages_request(std::string_view body, const SamplingParams& defaults,
                                         bool count_only) {
    const Json doc = parse_json_object(body);
    const Fields f(doc);
    GenerationRequest g;
    g.sampling = defaults;
    if (auto m = f.string("model")) g.model = *m;
    const auto max_tokens = f.integer("max_tokens", 1, std::numeric_limits<int64_t>::max());
    if (!max_tokens && !count_only) bad_field("max_tokens", "'max_tokens' is required");
    if (max_tokens) g.max_tokens = *max_tokens;
    if (auto v = f.boolean("stream")) g.stream = *v;
    parse_sampling(f, g);
    if (const Json* metadata = f.get("metadata"); metadata && !metadata->is_object())
        bad_field("metadata", "'metadata' must be an object");
    ChatInput chat;
    chat.messages = parse_conversation(f, chat.prefill);
    if (const Json* tools = f.get("tools")) chat.tools = parse_tools(*tools);
    parse_tool_choice(f, chat);
    parse_thinking(f, chat);
    g.input = std::move(chat);
    return g;
}

}  // namespace minfer::server
