// The template engine against Python's jinja2 on small templates that exercise one feature
// each: expected outputs (or the fact that jinja2 raised) were produced by jinja2 itself, in the
// environment Hugging Face uses (see jinja_semantics_cases.inc).

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "jinja/jinja_template.h"

namespace minfer::jinja {
namespace {

struct Case {
    const char* source;
    const char* expected;  // the output, or jinja2's error when `fails`
    bool fails;
};

// Shown by GoogleTest when a case fails or is listed.
void PrintTo(const Case& c, std::ostream* os) {
    *os << c.source;
}

const Case kCases[] = {
#include "jinja_semantics_cases.inc"
};

// The variables every case sees (the same as the generator's).
Dict context() {
    const auto json = nlohmann::ordered_json::parse(R"({
        "msgs": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}],
        "d": {"b": 2, "a": 1, "C": 3}, "s": "Hello World", "n": null, "xs": [3, 1, 2], "f": 2.5,
        "u": "Grüße 🦙"})");
    Dict vars;
    for (const auto& [key, value] : json.items())
        vars.set(Value::string(key), value_from_json(value));
    return vars;
}

RenderOptions fixed_clock() {
    RenderOptions options;
    options.now = std::chrono::system_clock::from_time_t(1721989800);  // 2024-07-26 10:30:00 UTC
    return options;
}

class JinjaSemantics : public ::testing::TestWithParam<Case> {};

TEST_P(JinjaSemantics, MatchesPythonJinja2) {
    const Case& c = GetParam();
    SCOPED_TRACE(c.source);
    if (!c.fails) {
        try {
            EXPECT_EQ(Template::parse(c.source).render(context(), fixed_clock()), c.expected);
        } catch (const Error& e) {
            ADD_FAILURE() << "unexpected error: " << e.what();
        }
        return;
    }
    try {
        const std::string out = Template::parse(c.source).render(context(), fixed_clock());
        ADD_FAILURE() << "expected an error like '" << c.expected << "', got output: " << out;
    } catch (const Error& e) {
        // Any error is accepted (as for the fixture renders); the message must say where.
        EXPECT_NE(std::string(e.what()).find("line "), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, JinjaSemantics, ::testing::ValuesIn(kCases));

}  // namespace
}  // namespace minfer::jinja
