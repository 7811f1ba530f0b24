// Chat-template speed: parsing a real template, and rendering the fixture's "tools" conversation
// with it (the prompt is built once per request, so this is latency, not throughput); and how
// long a hostile template holds a core before a render limit stops it (a model file's template is
// rendered for every request: each must stop within a second of CPU).

#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "core/file_io.h"

namespace {

const std::string kTemplates = std::string(MINFER_SHARED_DIR) + "/fixtures/templates/";

void parse_template(benchmark::State& state, const char* name) {
    const std::string source = minfer::read_file(kTemplates + name);
    if (source.empty()) return state.SkipWithError("fixture templates missing");
    for (auto _ : state) benchmark::DoNotOptimize(minfer::chat::ChatTemplate::parse(source));
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * source.size()));
}

void render_tools_case(benchmark::State& state, const char* name) {
    const std::string source = minfer::read_file(kTemplates + name);
    const std::string renders = minfer::read_file(kTemplates + "renders.json");
    if (source.empty() || renders.empty()) return state.SkipWithError("fixture templates missing");
    const auto cases = nlohmann::ordered_json::parse(renders)["cases"];
    const auto tmpl = minfer::chat::ChatTemplate::parse(source);
    minfer::chat::ChatInputs in;
    in.messages = cases["tools"]["messages"];
    in.tools = cases["tools"]["tools"];
    std::size_t bytes = 0;
    for (auto _ : state) {
        const std::string out = tmpl.render(in);
        bytes += out.size();
        benchmark::DoNotOptimize(out.data());
    }
    state.SetBytesProcessed(static_cast<int64_t>(bytes));
}

// One render of a template that never ends by itself, to the error of the limit that stops it.
void render_hostile(benchmark::State& state, const char* source) {
    const auto tmpl = minfer::chat::ChatTemplate::parse(source);
    minfer::chat::ChatInputs in;
    in.messages = nlohmann::ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
    for (auto _ : state) {
        try {
            tmpl.render(in);
            return state.SkipWithError("the hostile template rendered to its end");
        } catch (const minfer::Error&) {
        }
    }
}

#define HOSTILE_LOOPS(body) \
    "{% for a in range(100000) %}{% for b in range(100000) %}" body "{% endfor %}{% endfor %}"
BENCHMARK_CAPTURE(render_hostile, empty_loops, HOSTILE_LOOPS(""))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(render_hostile, arithmetic, HOSTILE_LOOPS("{% set x = a * b + a - b %}"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(render_hostile, macro_calls,
                  "{% macro f(x) %}{{ x }}{% endmacro %}" HOSTILE_LOOPS("{% set y = f(b) %}"))
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(render_hostile, string_work,
                  "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{% set t = s[::-1] %}"
                  "{% set n = 'y' in s %}{% endfor %}")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(render_hostile, list_filters,
                  "{% set l = range(100000) | list %}{% for i in range(100000) %}"
                  "{% set t = l | sort | reverse | join(',') %}{% endfor %}")
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(render_hostile, tojson,
                  "{% set l = range(100000) | list %}{% for i in range(100000) %}"
                  "{% set t = l | tojson %}{% endfor %}")
    ->Unit(benchmark::kMillisecond);

BENCHMARK_CAPTURE(parse_template, qwen2_5, "Qwen-Qwen2.5-7B-Instruct.jinja");
BENCHMARK_CAPTURE(parse_template, command_r7b,
                  "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja");
BENCHMARK_CAPTURE(render_tools_case, qwen2_5, "Qwen-Qwen2.5-7B-Instruct.jinja");
BENCHMARK_CAPTURE(render_tools_case, llama3_1, "meta-llama-Llama-3.1-8B-Instruct.jinja");
BENCHMARK_CAPTURE(render_tools_case, command_r7b,
                  "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja");

}  // namespace

BENCHMARK_MAIN();
