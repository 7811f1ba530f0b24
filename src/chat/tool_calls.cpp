#include "chat/tool_calls.h"

#include <nlohmann/json.hpp>
#include <random>

namespace minfer::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kMistral = "[TOOL_CALLS]";
constexpr std::string_view kFunctionOpen = "<function=";
constexpr std::string_view kFunctionClose = "</function>";
constexpr std::string_view kFunctools = "functools";
constexpr std::string_view kAction = "Action:";
constexpr std::string_view kStartAction = "<|START_ACTION|>";
constexpr std::string_view kEndAction = "<|END_ACTION|>";
constexpr std::string_view kDeepSeekCallsBegin = "<｜tool▁calls▁begin｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view trim(std::string_view s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos) return {};
    const auto last = s.find_last_not_of(" \t\r\n");
    return s.substr(first, last - first + 1);
}

// The first JSON value in `text` (after whitespace) and where it ends, or nullopt.
std::optional<Json> leading_json(std::string_view text, std::size_t& end) {
    const auto start = text.find_first_not_of(" \t\r\n");
    if (start == std::string_view::npos) return std::nullopt;
    // The value's extent: brackets balanced outside strings.
    int depth = 0;
    bool in_string = false, escaped = false;
    std::size_t i = start;
    const char open = text[start];
    if (open != '{' && open != '[') return std::nullopt;
    for (; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) break;
        }
    }
    if (i >= text.size()) return std::nullopt;
    try {
        Json value = Json::parse(text.substr(start, i + 1 - start));
        end = i + 1;
        return value;
    } catch (const Json::exception&) {
        return std::nullopt;
    }
}

// Arguments as JSON text: an object as it is, a string holding JSON as that JSON.
std::optional<std::string> arguments_text(const Json& args) {
    if (args.is_object()) return args.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (args.is_string()) {
        try {
            const Json inner = Json::parse(args.get<std::string>());
            if (inner.is_object())
                return inner.dump(-1, ' ', false, Json::error_handler_t::replace);
        } catch (const Json::exception&) {
        }
    }
    if (args.is_null()) return "{}";
    return std::nullopt;
}

// {"name": N, "<args_key>": {...}} -> a call; also accepts "arguments" or "parameters".
std::optional<ToolCall> call_of(const Json& v, const char* name_key = "name") {
    if (!v.is_object() || !v.contains(name_key) || !v[name_key].is_string()) return std::nullopt;
    const Json* args = nullptr;
    for (const char* key : {"arguments", "parameters"}) {
        if (v.contains(key)) args = &v[key];
    }
    const auto text = args ? arguments_text(*args) : std::optional<std::string>("{}");
    if (!text) return std::nullopt;
    ToolCall call;
    call.name = v[name_key].get<std::string>();
    call.arguments = *text;
    if (v.contains("id") && v["id"].is_string()) call.id = v["id"].get<std::string>();
    return call;
}

// A JSON array of calls; false when it is not one.
bool calls_of_array(const Json& v, std::vector<ToolCall>& out, const char* name_key = "name") {
    if (!v.is_array() || v.empty()) return false;
    std::vector<ToolCall> calls;
    for (const Json& item : v) {
        auto call = call_of(item, name_key);
        if (!call) return false;
        calls.push_back(std::move(*call));
    }
    out.insert(out.end(), calls.begin(), calls.end());
    return true;
}

// Text with blocks OPEN json CLOSE: the calls of the blocks, the rest as content.
ParsedAnswer parse_blocks(std::string_view text, std::string_view open, std::string_view close) {
    ParsedAnswer out;
    std::string content;
    std::size_t at = 0;
    while (true) {
        const std::size_t start = text.find(open, at);
        if (start == std::string_view::npos) break;
        std::size_t end = 0;
        const auto value = leading_json(text.substr(start + open.size()), end);
        const auto call = value ? call_of(*value) : std::nullopt;
        if (!call) break;
        content += text.substr(at, start - at);
        out.calls.push_back(*call);
        at = start + open.size() + end;
        const auto rest = text.substr(at);
        const auto closing = rest.find_first_not_of(" \t\r\n");
        if (closing != std::string_view::npos && rest.substr(closing, close.size()) == close)
            at += closing + close.size();
    }
    content += text.substr(at);
    out.content = out.calls.empty() ? std::string(text) : std::string(trim(content));
    return out;
}

// MARKER [calls...] (Mistral, functools, Command R7b's action list).
ParsedAnswer parse_marked_array(std::string_view text, std::string_view marker,
                                const char* name_key, std::string_view end_marker = {}) {
    ParsedAnswer out;
    const std::size_t start = text.find(marker);
    if (start == std::string_view::npos) return {std::string(text), {}};
    std::size_t end = 0;
    const auto value = leading_json(text.substr(start + marker.size()), end);
    if (!value || !calls_of_array(*value, out.calls, name_key)) return {std::string(text), {}};
    std::string_view rest = text.substr(start + marker.size() + end);
    if (!end_marker.empty()) {
        const auto t = trim(rest);
        if (t.substr(0, end_marker.size()) == end_marker) rest = t.substr(end_marker.size());
    }
    out.content = std::string(trim(std::string(text.substr(0, start)) + std::string(rest)));
    return out;
}

ParsedAnswer parse_llama3(std::string_view text) {
    std::string_view t = trim(text);
    if (t.substr(0, kPythonTag.size()) == kPythonTag) t = trim(t.substr(kPythonTag.size()));
    std::size_t end = 0;
    const auto value = leading_json(t, end);
    if (value && trim(t.substr(end)).empty()) {
        if (auto call = call_of(*value)) return {"", {*call}};
        ParsedAnswer out;
        if (calls_of_array(*value, out.calls)) return out;
    }
    return {std::string(text), {}};
}

ParsedAnswer parse_generic(std::string_view text) {
    const std::string_view t = trim(text);
    std::size_t end = 0;
    const auto value = leading_json(t, end);
    if (!value || !trim(t.substr(end)).empty() || !value->is_object())
        return {std::string(text), {}};
    ParsedAnswer out;
    if (value->contains("tool_calls") && calls_of_array((*value)["tool_calls"], out.calls))
        return out;
    if (value->contains("tool_call")) {
        if (auto call = call_of((*value)["tool_call"])) return {"", {*call}};
    }
    if (auto call = call_of(*value)) return {"", {*call}};
    if (value->contains("content") && (*value)["content"].is_string() && value->size() == 1)
        return {(*value)["content"].get<std::string>(), {}};
    return {std::string(text), {}};
}

ParsedAnswer parse_functionary_v31(std::string_view text) {
    ParsedAnswer out;
    std::string content;
    std::size_t at = 0;
    while (true) {
        const std::size_t start = text.find(kFunctionOpen, at);
        if (start == std::string_view::npos) break;
        const std::size_t name_end = text.find('>', start);
        if (name_end == std::string_view::npos) break;
        std::size_t end = 0;
        const auto args = leading_json(text.substr(name_end + 1), end);
        const auto args_text = args ? arguments_text(*args) : std::nullopt;
        if (!args_text) break;
        content += text.substr(at, start - at);
        ToolCall call;
        call.name = std::string(
            text.substr(start + kFunctionOpen.size(), name_end - start - kFunctionOpen.size()));
        call.arguments = *args_text;
        out.calls.push_back(std::move(call));
        at = name_end + 1 + end;
        if (text.substr(at, kFunctionClose.size()) == kFunctionClose) at += kFunctionClose.size();
    }
    content += text.substr(at);
    out.content = out.calls.empty() ? std::string(text) : std::string(trim(content));
    return out;
}

// NAME\nBODY segments separated by ">>>" (the first one's ">>>" ends the prompt).
ParsedAnswer parse_functionary_v32(std::string_view text) {
    ParsedAnswer out;
    std::string content;
    std::size_t at = text.substr(0, 3) == ">>>" ? 3 : 0;
    while (at <= text.size()) {
        std::size_t next = text.find(">>>", at);
        if (next == std::string_view::npos) next = text.size();
        const std::string_view segment = text.substr(at, next - at);
        const std::size_t newline = segment.find('\n');
        const std::string_view name =
            trim(newline == std::string_view::npos ? segment : segment.substr(0, newline));
        const std::string_view body =
            newline == std::string_view::npos ? std::string_view{} : segment.substr(newline + 1);
        if (name == "all") {
            content += body;
        } else {
            std::size_t end = 0;
            const auto args = leading_json(body, end);
            const auto args_text = args ? arguments_text(*args) : std::nullopt;
            if (!args_text || name.empty()) return {std::string(text), {}};
            out.calls.push_back({"", std::string(name), *args_text});
        }
        at = next + 3;
    }
    out.content = std::string(trim(content));
    return out;
}

ParsedAnswer parse_command_r(std::string_view text) {
    const std::size_t start = text.find(kAction);
    if (start == std::string_view::npos) return {std::string(text), {}};
    std::string_view rest = trim(text.substr(start + kAction.size()));
    if (rest.substr(0, 3) == "```") {
        const auto newline = rest.find('\n');
        rest = newline == std::string_view::npos ? std::string_view{} : rest.substr(newline + 1);
    }
    std::size_t end = 0;
    const auto value = leading_json(rest, end);
    ParsedAnswer out;
    if (!value || !calls_of_array(*value, out.calls, "tool_name")) return {std::string(text), {}};
    // The "directly-answer" tool means no call.
    std::erase_if(out.calls, [](const ToolCall& c) { return c.name == "directly-answer"; });
    out.content = std::string(trim(text.substr(0, start)));
    return out;
}

ParsedAnswer parse_command_r7b(std::string_view text) {
    ParsedAnswer out = parse_marked_array(text, kStartAction, "tool_name", kEndAction);
    // Its answer text sits in <|START_RESPONSE|> ... <|END_RESPONSE|>; its thinking is dropped.
    for (const auto& [open, close] : {std::pair<std::string_view, std::string_view>{
             "<|START_THINKING|>", "<|END_THINKING|>"}}) {
        const auto a = out.content.find(open);
        const auto b = out.content.find(close);
        if (a != std::string::npos && b != std::string::npos && b > a)
            out.content.erase(a, b + close.size() - a);
    }
    for (const std::string_view marker : {"<|START_RESPONSE|>", "<|END_RESPONSE|>"}) {
        for (auto p = out.content.find(marker); p != std::string::npos;
             p = out.content.find(marker))
            out.content.erase(p, marker.size());
    }
    if (!out.calls.empty()) out.content = std::string(trim(out.content));
    return out;
}

ParsedAnswer parse_deepseek_r1(std::string_view text) {
    ParsedAnswer out;
    const std::size_t begin = text.find(kDeepSeekCallsBegin);
    if (begin == std::string_view::npos) return {std::string(text), {}};
    std::size_t at = begin + kDeepSeekCallsBegin.size();
    while (true) {
        const std::size_t call = text.find(kDeepSeekCallBegin, at);
        if (call == std::string_view::npos) break;
        const std::size_t sep = text.find(kDeepSeekSep, call);
        if (sep == std::string_view::npos) break;
        const std::size_t newline = text.find('\n', sep);
        if (newline == std::string_view::npos) break;
        std::string_view body = text.substr(newline + 1);
        if (body.substr(0, 7) == "```json") body = body.substr(7);
        std::size_t end = 0;
        const auto args = leading_json(body, end);
        const auto args_text = args ? arguments_text(*args) : std::nullopt;
        if (!args_text) break;
        out.calls.push_back({"",
                             std::string(trim(text.substr(sep + kDeepSeekSep.size(),
                                                          newline - sep - kDeepSeekSep.size()))),
                             *args_text});
        const std::size_t call_end = text.find(kDeepSeekCallEnd, newline);
        at = call_end == std::string_view::npos ? text.size() : call_end + kDeepSeekCallEnd.size();
    }
    if (out.calls.empty()) return {std::string(text), {}};
    std::string_view after = text.substr(std::min(at, text.size()));
    const auto close = after.find(kDeepSeekCallsEnd);
    if (close != std::string_view::npos) after = after.substr(close + kDeepSeekCallsEnd.size());
    out.content = std::string(trim(std::string(text.substr(0, begin)) + std::string(after)));
    return out;
}

}  // namespace

ToolCallFormat detect_tool_call_format(std::string_view t) {
    const auto has = [&](std::string_view s) { return t.find(s) != std::string_view::npos; };
    if (has(kHermesOpen)) return ToolCallFormat::Hermes;
    if (has(kMistral)) return ToolCallFormat::Mistral;
    if (has(kFunctionOpen)) return ToolCallFormat::FunctionaryV31;
    if (has(">>>all")) return ToolCallFormat::FunctionaryV32;
    if (has("functools[")) return ToolCallFormat::FireFunction;
    if (has(kStartAction)) return ToolCallFormat::CommandR7b;
    if (has(kAction) && has("tool_name")) return ToolCallFormat::CommandR;
    if (has("tool▁call▁begin")) return ToolCallFormat::DeepSeekR1;
    if (has("<|start_header_id|>") && (has("ipython") || has("tools")))
        return ToolCallFormat::Llama3;
    return ToolCallFormat::Generic;
}

const char* tool_call_format_name(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
            return "hermes";
        case ToolCallFormat::Llama3:
            return "llama3";
        case ToolCallFormat::Mistral:
            return "mistral";
        case ToolCallFormat::FunctionaryV31:
            return "functionary-v3.1";
        case ToolCallFormat::FunctionaryV32:
            return "functionary-v3.2";
        case ToolCallFormat::FireFunction:
            return "firefunction";
        case ToolCallFormat::CommandR:
            return "command-r";
        case ToolCallFormat::CommandR7b:
            return "command-r7b";
        case ToolCallFormat::DeepSeekR1:
            return "deepseek-r1";
        case ToolCallFormat::Generic:
            return "generic";
    }
    return "?";
}

std::string_view tool_call_trigger(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
            return kHermesOpen;
        case ToolCallFormat::Mistral:
            return kMistral;
        case ToolCallFormat::FunctionaryV31:
            return kFunctionOpen;
        case ToolCallFormat::FunctionaryV32:
            return ">>>";
        case ToolCallFormat::FireFunction:
            return kFunctools;
        case ToolCallFormat::CommandR:
            return kAction;
        case ToolCallFormat::CommandR7b:
            return kStartAction;
        case ToolCallFormat::DeepSeekR1:
            return kDeepSeekCallsBegin;
        case ToolCallFormat::Llama3:
        case ToolCallFormat::Generic:
            return {};
    }
    return {};
}

std::vector<std::string_view> tool_call_markers(ToolCallFormat f) {
    switch (f) {
        case ToolCallFormat::Hermes:
            return {kHermesOpen, kHermesClose};
        case ToolCallFormat::Mistral:
            return {kMistral};
        case ToolCallFormat::CommandR7b:
            return {kStartAction,       kEndAction,           "<|START_RESPONSE|>",
                    "<|END_RESPONSE|>", "<|START_THINKING|>", "<|END_THINKING|>"};
        case ToolCallFormat::DeepSeekR1:
            return {kDeepSeekCallsBegin, kDeepSeekCallBegin, kDeepSeekSep, kDeepSeekCallEnd,
                    kDeepSeekCallsEnd};
        case ToolCallFormat::Llama3:
            return {kPythonTag};
        default:
            return {};
    }
}

ParsedAnswer parse_tool_calls(ToolCallFormat format, std::string_view text) {
    switch (format) {
        case ToolCallFormat::Hermes:
            return parse_blocks(text, kHermesOpen, kHermesClose);
        case ToolCallFormat::Llama3:
            return parse_llama3(text);
        case ToolCallFormat::Mistral:
            return parse_marked_array(text, kMistral, "name");
        case ToolCallFormat::FunctionaryV31:
            return parse_functionary_v31(text);
        case ToolCallFormat::FunctionaryV32:
            return parse_functionary_v32(text);
        case ToolCallFormat::FireFunction:
            return parse_marked_array(text, kFunctools, "name");
        case ToolCallFormat::CommandR:
            return parse_command_r(text);
        case ToolCallFormat::CommandR7b:
            return parse_command_r7b(text);
        case ToolCallFormat::DeepSeekR1:
            return parse_deepseek_r1(text);
        case ToolCallFormat::Generic:
            return parse_generic(text);
    }
    return {std::string(text), {}};
}

ParsedAnswer ToolCallStream::push(std::string_view text) {
    held_ += text;
    if (in_calls_) return {};
    ParsedAnswer out;
    if (format_ == ToolCallFormat::Llama3 || format_ == ToolCallFormat::Generic ||
        format_ == ToolCallFormat::FunctionaryV32) {
        // The answer's start decides: held until it does.
        if (started_) {
            out.content = std::move(held_);
            held_.clear();
            return out;
        }
        const auto first = held_.find_first_not_of(" \t\r\n");
        if (first == std::string::npos) return out;
        const std::string_view start = std::string_view(held_).substr(first);
        if (format_ == ToolCallFormat::FunctionaryV32) {
            const auto newline = start.find('\n');
            if (newline == std::string_view::npos) return out;  // the recipient is not known yet
            started_ = true;
            if (trim(start.substr(0, newline)) != "all") {
                in_calls_ = true;
                return out;
            }
            held_ = std::string(start.substr(newline + 1));  // the text, without "all\n"
            return push("");
        }
        const bool may_be_tag = kPythonTag.substr(0, std::min(start.size(), kPythonTag.size())) ==
                                start.substr(0, std::min(start.size(), kPythonTag.size()));
        if (start[0] == '{' || (format_ == ToolCallFormat::Llama3 && may_be_tag)) {
            if (start[0] != '{' && start.size() < kPythonTag.size()) return out;  // undecided
            if (start[0] == '{' || start.substr(0, kPythonTag.size()) == kPythonTag) {
                in_calls_ = true;
                return out;
            }
        }
        started_ = true;
        out.content = std::move(held_);
        held_.clear();
        return out;
    }
    // A trigger opens the calls; text that may be the start of one is held back.
    const std::string_view trigger = tool_call_trigger(format_);
    const std::size_t at = held_.find(trigger);
    if (at != std::string::npos) {
        out.content = held_.substr(0, at);
        held_.erase(0, at);
        in_calls_ = true;
        return out;
    }
    std::size_t keep = std::min(held_.size(), trigger.size() - 1);
    while (keep > 0 && held_.compare(held_.size() - keep, keep, trigger, 0, keep) != 0) --keep;
    out.content = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

ParsedAnswer ToolCallStream::finish() {
    std::string rest = std::move(held_);
    held_.clear();
    if (!in_calls_) return {std::move(rest), {}};
    if (format_ == ToolCallFormat::FunctionaryV32) {
        // The calls started at the answer's first recipient (the prompt held its ">>>").
        const auto first = rest.find_first_not_of(" \t\r\n");
        if (first != std::string::npos) rest.erase(0, first);
    }
    ParsedAnswer parsed = parse_tool_calls(format_, rest);
    if (parsed.calls.empty()) return {std::move(rest), {}};
    return parsed;
}

std::string new_tool_call_id(ToolCallFormat format) {
    static constexpr char kAlphabet[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static thread_local std::mt19937_64 rng{std::random_device{}()};
    std::uniform_int_distribution<std::size_t> pick(0, sizeof kAlphabet - 2);
    const bool mistral = format == ToolCallFormat::Mistral;
    std::string id = mistral ? "" : "call_";
    for (int i = 0; i < (mistral ? 9 : 24); ++i) id += kAlphabet[pick(rng)];
    return id;
}

}  // namespace minfer::chat
