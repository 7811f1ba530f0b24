// libFuzzer target for the chat-template engine: lexer, parser and interpreter.
// Input: template text, then optionally a NUL byte and a JSON object of template variables
// (default: a short conversation with tools). Rendering runs under tight limits; any
// minfer::Error is an accepted outcome, anything else (crash, hang, leak) is a finding.
//
// LLVMFuzzerInitialize writes seed inputs (the fixture chat templates and a few hand-written
// ones) into $MINFER_FUZZ_SEED_DIR when that folder is set and empty.

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "chat/chat_template.h"
#include "seed_dir.h"

namespace {

const char* const kDefaultContext = R"({
  "messages": [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris? é🦙"},
    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
  "add_generation_prompt": true
})";

const char* const kHandSeeds[] = {
    "{% for m in messages %}{{ loop.index }}{{ m.role|upper }}{% if not loop.last %}, {% endif "
    "%}{% endfor %}",
    "{%- set ns = namespace(n=0) -%}{% for x in range(5) %}{% set ns.n = ns.n + x %}{% endfor %}{{ "
    "ns.n }}",
    "{% macro f(a, b=2) %}{{ a ~ b }}{{ caller() if caller is defined }}{% endmacro %}{% call f(1) "
    "%}x{% endcall %}",
    "{{ tools | tojson(indent=2) }}{{ messages | map(attribute='role') | unique | list }}",
    "{{ 'a,b'.split(',') }}{{ '%s-%d' % ('x', 3) }}{{ '{0}:{name}'.format(1, name='n') }}{{ "
    "[3,1,2]|sort }}",
    "{% filter upper %}abc{% endfilter %}{% set x %}  y  {% endset %}{{ x|trim }}{{ x[1:3] }}{{ "
    "x[::-1] }}",
    "{{ raise_exception('boom') if messages|length > 10 }}{{ strftime_now('%Y-%m-%d') }}{{ 7 // 2 "
    "}}{{ 2 ** 10 }}",
    "{% for k, v in tools[0].function.items() if k != 'name' %}{{ k }}={{ v }}{% else %}none{% "
    "endfor %}",
};

std::filesystem::path shared_dir() {
    if (const char* env = std::getenv("MINFER_SHARED_DIR")) return env;
#ifdef MINFER_SHARED_DIR
    if (std::filesystem::exists(MINFER_SHARED_DIR)) return MINFER_SHARED_DIR;
#endif
    return "../shared";
}

void write_seed(const std::filesystem::path& dir, const std::string& name,
                const std::string& bytes) {
    std::ofstream(dir / name, std::ios::binary) << bytes;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const auto seed_dir = minfer::fuzz::empty_seed_dir();
    if (!seed_dir) return 0;
    const std::filesystem::path& dir = *seed_dir;
    int n = 0;
    for (const char* seed : kHandSeeds) write_seed(dir, "hand-" + std::to_string(n++), seed);
    const auto templates = shared_dir() / "fixtures" / "templates";
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(templates, ec)) {
        if (entry.path().extension() != ".jinja") continue;
        std::ifstream in(entry.path(), std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
        write_seed(dir, entry.path().stem().string(), text);
    }
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t split = input.find('\0');
    const std::string source(input.substr(0, split));

    auto context = nlohmann::ordered_json::parse(kDefaultContext);
    if (split != std::string_view::npos) {
        auto parsed = nlohmann::ordered_json::parse(input.substr(split + 1), nullptr, false);
        if (parsed.is_object()) context = std::move(parsed);
    }

    minfer::jinja::RenderLimits limits;
    limits.max_output_bytes = 1 << 20;
    limits.max_work_units = 8 << 20;
    limits.max_steps = 200'000;
    limits.max_call_depth = 50;
    try {
        const auto tmpl = minfer::chat::ChatTemplate::parse(source);
        minfer::chat::ChatInputs in;
        in.messages = context.value("messages", nlohmann::ordered_json::array());
        if (context.contains("tools")) in.tools = context["tools"];
        in.add_generation_prompt = context.value("add_generation_prompt", true) == true;
        in.bos_token = "<s>";
        in.eos_token = "</s>";
        in.now = std::chrono::system_clock::from_time_t(1721989800);
        (void)tmpl.render(in, limits);
    } catch (const minfer::Error&) {
    } catch (const nlohmann::json::exception&) {  // a context whose fields have the wrong JSON type
    }
    return 0;
}
