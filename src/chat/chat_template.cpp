#include "chat/chat_template.h"

#include "core/file_io.h"

namespace minfer::chat {

const std::string_view kChatMlTemplate =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}"
    "{% endif %}";

ChatTemplate ChatTemplate::parse(std::string source) {
    ChatTemplate t;
    try {
        t.template_ = jinja::Template::parse(source);
    } catch (const FormatError& e) {
        throw FormatError(concat("chat template ", e.what()));
    }
    t.source_ = std::move(source);
    return t;
}

std::string ChatTemplate::render(const ChatInputs& in) const {
    return render(in, jinja::RenderLimits{});
}

std::string ChatTemplate::render(const ChatInputs& in, const jinja::RenderLimits& limits) const {
    using jinja::Value;
    jinja::Dict vars;
    vars.set(Value::string("messages"), jinja::value_from_json(in.messages));
    if (!in.tools.is_null()) vars.set(Value::string("tools"), jinja::value_from_json(in.tools));
    vars.set(Value::string("add_generation_prompt"), Value::boolean(in.add_generation_prompt));
    vars.set(Value::string("bos_token"), Value::string(in.bos_token));
    vars.set(Value::string("eos_token"), Value::string(in.eos_token));
    if (!in.extra_context.is_null()) {
        if (!in.extra_context.is_object())
            throw FormatError("chat template extra context must be a JSON object");
        for (const auto& [key, value] : in.extra_context.items())
            vars.set(Value::string(key), jinja::value_from_json(value));
    }
    jinja::RenderOptions options;
    options.limits = limits;
    options.now = in.now;
    try {
        return template_.render(vars, options);
    } catch (const jinja::TemplateError& e) {
        throw jinja::TemplateError(concat("chat template ", e.what()));
    }
}

std::string template_source_for(const GgufMetadata& meta,
                                const std::optional<std::filesystem::path>& override_file) {
    if (override_file) return read_file(*override_file, "template file");
    if (auto source = meta.get_string_optional("tokenizer.chat_template"))
        return std::string(*source);
    return std::string(kChatMlTemplate);
}

std::string special_token_text(const GgufMetadata& meta, std::string_view key) {
    const auto id = meta.get_int_optional(key);
    if (!id) return "";
    const GgufArray* tokens = meta.get_array_optional("tokenizer.ggml.tokens");
    if (tokens == nullptr)
        throw FormatError(concat(meta.source(), ": metadata key '", key,
                                 "' is set but tokenizer.ggml.tokens is missing"));
    if (tokens->element_type() != GgufType::String)
        throw FormatError(
            concat(meta.source(), ": tokenizer.ggml.tokens is not an array of strings"));
    if (*id < 0 || static_cast<uint64_t>(*id) >= tokens->strings().size())
        throw FormatError(concat(meta.source(), ": metadata key '", key, "' = ", *id,
                                 " is outside the vocabulary of ", tokens->strings().size(),
                                 " tokens"));
    return std::string(tokens->strings()[static_cast<std::size_t>(*id)]);
}

}  // namespace minfer::chat
