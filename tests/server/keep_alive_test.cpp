// ollama's keep_alive: Go durations, numbers of seconds, negative for "keep".

#include "server/keep_alive.h"

#include <gtest/gtest.h>

#include "server/api_error.h"

namespace minfer::server {
namespace {

using std::chrono::milliseconds;

TEST(KeepAlive, ParsesGoDurationsAndSeconds) {
    EXPECT_EQ(parse_keep_alive("5m"), milliseconds(300'000));
    EXPECT_EQ(parse_keep_alive("1h30m"), milliseconds(5'400'000));
    EXPECT_EQ(parse_keep_alive("90s"), milliseconds(90'000));
    EXPECT_EQ(parse_keep_alive("1.5s"), milliseconds(1'500));
    EXPECT_EQ(parse_keep_alive("250ms"), milliseconds(250));
    EXPECT_EQ(parse_keep_alive("0.5h"), milliseconds(1'800'000));
    EXPECT_EQ(parse_keep_alive("0"), milliseconds(0));
    EXPECT_EQ(parse_keep_alive("30"), milliseconds(30'000));
    EXPECT_EQ(parse_keep_alive("-1"), milliseconds(-1));
    EXPECT_EQ(parse_keep_alive("-5m"), milliseconds(-1));
}

TEST(KeepAlive, RefusesWhatIsNoDuration) {
    for (const char* text : {"", "m", "5x", "5 m", "forever", "1h-5m", "5m5", "nan", "inf",
                             "1e300h", "99999999h"})
        EXPECT_EQ(parse_keep_alive(text), std::nullopt) << text;
}

TEST(KeepAlive, ReadsTheRequestField) {
    EXPECT_EQ(keep_alive_from_json(nlohmann::ordered_json("10m")), milliseconds(600'000));
    EXPECT_EQ(keep_alive_from_json(nlohmann::ordered_json(0)), milliseconds(0));
    EXPECT_EQ(keep_alive_from_json(nlohmann::ordered_json(-1)), milliseconds(-1));
    EXPECT_EQ(keep_alive_from_json(nlohmann::ordered_json(2.5)), milliseconds(2'500));
    EXPECT_THROW(keep_alive_from_json(nlohmann::ordered_json(true)), ApiError);
    EXPECT_THROW(keep_alive_from_json(nlohmann::ordered_json("soon")), ApiError);
    EXPECT_THROW(keep_alive_from_json(nlohmann::ordered_json::array()), ApiError);
}

}  // namespace
}  // namespace minfer::server
