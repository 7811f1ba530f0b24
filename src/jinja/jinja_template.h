#pragma once
// A Jinja template engine that renders chat templates byte-for-byte like Python's jinja2 does
// under Hugging Face's apply_chat_template (sandboxed, trim_blocks and lstrip_blocks on).
//
//   auto t = jinja::Template::parse("{{ messages[0].content | trim }}");   // FormatError
//   Dict vars; vars.set(Value::string("messages"), value_from_json(msgs));
//   std::string text = t.render(vars);                                     // TemplateError

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "jinja/jinja_ast.h"
#include "jinja/jinja_interpreter.h"
#include "jinja/jinja_value.h"

namespace minfer::jinja {

class Template {
  public:
    // Throws FormatError "line L, column C: ..." when the source is not a valid template.
    static Template parse(std::string_view source);
    // Throws TemplateError "line L, column C: ..." when rendering fails (including the
    // template's own raise_exception) or exceeds a limit.
    std::string render(const Dict& variables, const RenderOptions& options = {}) const;

  private:
    std::shared_ptr<const Body> body_;
};

// A JSON value as a template value (objects keep their key order). Nesting deeper than 512
// levels throws FormatError.
Value value_from_json(const nlohmann::ordered_json& json);

}  // namespace minfer::jinja
