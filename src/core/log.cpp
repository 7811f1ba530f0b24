#include "core/log.h"

#include <mutex>
#include <string>
#include <utility>

namespace minfer {
namespace {
std::mutex sink_mutex;
LogSink& current_sink() {
    static LogSink sink;
    return sink;
}
}  // namespace

void set_log_sink(LogSink sink) {
    std::lock_guard lock(sink_mutex);
    current_sink() = std::move(sink);
}

void log_message(LogLevel level, std::string_view message) {
    std::lock_guard lock(sink_mutex);
    if (current_sink()) current_sink()(level, message);
}

}  // namespace minfer
