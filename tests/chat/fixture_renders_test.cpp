// Every template x case of ../shared/fixtures/templates/renders.json: the expected output byte
// for byte, or an error where Python's jinja2 raised one.

#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_template.h"
#include "common/fixtures.h"
#include "core/file_io.h"

namespace minfer::chat {
namespace {

// "2024-07-26T10:30:00" as a UTC time point.
std::chrono::system_clock::time_point parse_clock(const std::string& text) {
    std::tm tm{};
    std::istringstream in(text);
    in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
    return std::chrono::system_clock::from_time_t(timegm(&tm));
}

TEST(FixtureRenders, EveryTemplateAndCaseMatchesJinja2) {
    MINFER_REQUIRE_FIXTURE(renders_path, "templates/renders.json");
    const auto renders = nlohmann::ordered_json::parse(read_file(renders_path));
    const auto& env = renders.at("environment");
    ASSERT_TRUE(env.at("trim_blocks").get<bool>());
    ASSERT_TRUE(env.at("lstrip_blocks").get<bool>());

    int pairs = 0, passed = 0;
    for (const auto& [name, cases] : renders.at("templates").items()) {
        const std::string source = read_file(renders_path.parent_path() / name);
        ASSERT_FALSE(source.empty()) << name;
        const ChatTemplate tmpl = ChatTemplate::parse(source);
        for (const auto& [case_name, expected] : cases.items()) {
            ++pairs;
            const auto& c = renders.at("cases").at(case_name);
            ChatInputs in;
            in.messages = c.at("messages");
            if (c.contains("tools")) in.tools = c.at("tools");
            in.add_generation_prompt = c.at("add_generation_prompt").get<bool>();
            in.bos_token = env.at("bos_token").get<std::string>();
            in.eos_token = env.at("eos_token").get<std::string>();
            in.now = parse_clock(env.at("now").get<std::string>());
            SCOPED_TRACE(name + " / " + case_name);
            if (expected.contains("output")) {
                try {
                    const std::string out = tmpl.render(in);
                    EXPECT_EQ(out, expected.at("output").get<std::string>());
                    if (out == expected.at("output").get<std::string>()) ++passed;
                } catch (const Error& e) {
                    ADD_FAILURE() << "unexpected error: " << e.what();
                }
            } else {
                ASSERT_TRUE(expected.contains("error"));
                try {
                    const std::string out = tmpl.render(in);
                    ADD_FAILURE() << "expected error '" << expected.at("error").get<std::string>()
                                  << "', got output:\n"
                                  << out;
                } catch (const Error&) {
                    ++passed;
                }
            }
        }
    }
    EXPECT_EQ(pairs, 90);
    EXPECT_EQ(passed, pairs);
    std::printf("template x case pairs passing: %d / %d\n", passed, pairs);
}

}  // namespace
}  // namespace minfer::chat

namespace minfer::chat {
namespace {

// More conversations (reasoning in an assistant turn, content given as parts, tool-call
// arguments as a JSON string) through every fixture template, expected outputs from jinja2.
struct VariantCase {
    const char* template_name;
    const char* messages;
    const char* expected;  // the output, or jinja2's error when `fails`
    bool fails;
};

const VariantCase kVariants[] = {
#include "fixture_variants_cases.inc"
};

TEST(FixtureRenders, MoreConversationsMatchJinja2) {
    MINFER_REQUIRE_FIXTURE(templates, "templates");
    int passed = 0;
    for (const VariantCase& c : kVariants) {
        SCOPED_TRACE(std::string(c.template_name) + " " + c.messages);
        const ChatTemplate tmpl = ChatTemplate::parse(read_file(templates / c.template_name));
        ChatInputs in;
        in.messages = nlohmann::ordered_json::parse(c.messages);
        in.bos_token = "<s>";
        in.eos_token = "</s>";
        in.now = parse_clock("2024-07-26T10:30:00");
        try {
            const std::string out = tmpl.render(in);
            if (c.fails)
                ADD_FAILURE() << "expected an error like '" << c.expected << "', got:\n" << out;
            else
                EXPECT_EQ(out, c.expected);
            passed += !c.fails && out == c.expected;
        } catch (const Error& e) {
            if (!c.fails) ADD_FAILURE() << "unexpected error: " << e.what();
            passed += c.fails;
        }
    }
    EXPECT_EQ(passed, static_cast<int>(std::size(kVariants)));
}

// The least value of one limit (max_steps, max_work_units) a render succeeds with: renders
// succeed from that value up, so a binary search finds it.
uint64_t least_limit(const ChatTemplate& tmpl, const ChatInputs& in,
                     uint64_t jinja::RenderLimits::*limit) {
    uint64_t low = 0, high = jinja::RenderLimits{}.*limit;  // low fails, high succeeds
    while (high - low > 1) {
        jinja::RenderLimits limits;
        limits.*limit = low + (high - low) / 2;
        try {
            tmpl.render(in, limits);
            high = limits.*limit;
        } catch (const jinja::TemplateError&) {
            low = limits.*limit;
        }
    }
    return high;
}

// The step and work budgets stop a hostile template within about half a second of CPU
// (bench_chat's render_hostile); they must leave every real template room: each fixture
// template renders a conversation of 200 messages of 2 KB with the fixture's tools (without, for
// the one template that takes them in another shape) in under a tenth of either.
TEST(FixtureRenders, LongConversationsUseATenthOfTheBudgets) {
    MINFER_REQUIRE_FIXTURE(renders_path, "templates/renders.json");
    const auto renders = nlohmann::ordered_json::parse(read_file(renders_path));
    ChatInputs in;
    in.messages = nlohmann::ordered_json::array();
    for (int i = 0; i < 200; ++i) {
        in.messages.push_back({{"role", i % 2 == 0 ? "user" : "assistant"},
                               {"content", std::string(2048, static_cast<char>('a' + i % 26))}});
    }
    in.tools = renders.at("cases").at("tools").at("tools");
    // firefunction-v2 reads the tools as `functions` and the date as `datetime`.
    in.extra_context = {{"functions", in.tools.dump()}, {"datetime", "2024-07-26 10:30"}};
    in.add_generation_prompt = true;
    in.bos_token = "<s>";
    in.eos_token = "</s>";
    in.now = parse_clock("2024-07-26T10:30:00");
    const jinja::RenderLimits defaults;
    uint64_t most_steps = 0, most_work = 0;
    for (const auto& [name, cases] : renders.at("templates").items()) {
        const ChatTemplate tmpl = ChatTemplate::parse(read_file(renders_path.parent_path() / name));
        ChatInputs conversation = in;
        try {
            tmpl.render(conversation);
        } catch (const jinja::TemplateError&) {  // Command R+ takes its tools in another shape
            conversation.tools = nullptr;
        }
        ASSERT_NO_THROW(tmpl.render(conversation)) << name;
        const uint64_t steps = least_limit(tmpl, conversation, &jinja::RenderLimits::max_steps);
        const uint64_t work = least_limit(tmpl, conversation, &jinja::RenderLimits::max_work_units);
        EXPECT_LE(steps, defaults.max_steps / 10) << name;
        EXPECT_LE(work, defaults.max_work_units / 10) << name;
        most_steps = std::max(most_steps, steps);
        most_work = std::max(most_work, work);
    }
    std::printf("the most any fixture template took: %llu steps of %llu, %llu work units of %llu\n",
                static_cast<unsigned long long>(most_steps),
                static_cast<unsigned long long>(defaults.max_steps),
                static_cast<unsigned long long>(most_work),
                static_cast<unsigned long long>(defaults.max_work_units));
}

}  // namespace
}  // namespace minfer::chat
