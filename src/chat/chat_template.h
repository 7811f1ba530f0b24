#pragma once
// Chat formatting: turns a conversation (OpenAI-style messages, tools) into the prompt text a
// model expects, with the model's own chat template (GGUF key tokenizer.chat_template), a
// replacement template file, or ChatML when the model has none.
//
//   ChatTemplate t = ChatTemplate::parse(template_source_for(meta, std::nullopt));
//   ChatInputs in;
//   in.messages = nlohmann::ordered_json::parse(R"([{"role":"user","content":"Hi"}])");
//   in.bos_token = special_token_text(meta, "tokenizer.ggml.bos_token_id");
//   std::string prompt = t.render(in);

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf_metadata.h"
#include "jinja/jinja_template.h"

namespace minfer::chat {

struct ChatInputs {
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    nlohmann::ordered_json tools;  // null = none (the template sees `tools` undefined)
    bool add_generation_prompt = true;
    std::string bos_token, eos_token;
    std::optional<std::chrono::system_clock::time_point> now;  // fixes strftime_now (read as UTC)
    nlohmann::ordered_json extra_context;  // an object: more template variables (they win)
};

class ChatTemplate {
  public:
    // Throws FormatError "chat template line L, column C: ..." for an invalid template.
    static ChatTemplate parse(std::string source);
    // Renders the prompt; throws jinja::TemplateError (a minfer::Error) "chat template line L,
    // column C: ..." when the template fails or raises, FormatError for bad inputs.
    std::string render(const ChatInputs& in) const;
    std::string render(const ChatInputs& in, const jinja::RenderLimits& limits) const;

    const std::string& source() const { return source_; }

  private:
    std::string source_;
    jinja::Template template_;
};

// ChatML, the template used when a model has none.
extern const std::string_view kChatMlTemplate;

// The template to use: the contents of `override_file` when given (IoError if unreadable),
// else the model's tokenizer.chat_template, else ChatML.
std::string template_source_for(const GgufMetadata& meta,
                                const std::optional<std::filesystem::path>& override_file);

// The text of the special token whose id is stored under `key` (e.g.
// "tokenizer.ggml.bos_token_id"): tokenizer.ggml.tokens[id]. Empty when the key is absent;
// FormatError when the id is out of range or the vocabulary is missing.
std::string special_token_text(const GgufMetadata& meta, std::string_view key);

}  // namespace minfer::chat
