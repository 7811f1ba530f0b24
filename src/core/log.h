#pragma once
// Library code never prints: it reports warnings and progress through this sink, which the
// command-line front end points at stderr. The default sink drops messages (tests, embedders).

#include <functional>
#include <string_view>

namespace minfer {

enum class LogLevel { Debug, Info, Warning };

using LogSink = std::function<void(LogLevel, std::string_view)>;

void set_log_sink(LogSink sink);
void log_message(LogLevel level, std::string_view message);
inline void log_warning(std::string_view message) {
    log_message(LogLevel::Warning, message);
}
inline void log_info(std::string_view message) {
    log_message(LogLevel::Info, message);
}

}  // namespace minfer
