#include "cli/download_progress.h"

#include <cmath>
#include <cstdio>

#include "cli/format.h"
#include "core/error.h"
#include "core/log.h"
#include "core/terminal_text.h"

namespace minfer::cli {
namespace {

constexpr std::chrono::seconds kLineInterval{5};

}  // namespace

std::string format_rate(double bps) {
    if (!std::isfinite(bps) || bps < 0) bps = 0;
    if (bps >= 1e9) return format_fixed(bps / 1e9, 2) + " GB/s";
    if (bps >= 1e6) return format_fixed(bps / 1e6, 1) + " MB/s";
    return format_fixed(bps / 1e3, 1) + " kB/s";
}

std::string format_duration(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) return "?";
    const auto s = static_cast<long long>(std::llround(seconds));
    char text[32];
    if (s >= 3600)
        std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", s / 3600, s / 60 % 60, s % 60);
    else
        std::snprintf(text, sizeof text, "%lld:%02lld", s / 60, s % 60);
    return text;
}

hub::DownloadEvents DownloadDisplay::events(const std::atomic<bool>* cancel) {
    hub::DownloadEvents e;
    e.cancel = cancel;
    e.on_progress = [this](const hub::DownloadProgress& p) { progress(p); };
    e.on_notice = [this](const std::string& text) { notice(text); };
    return e;
}

void DownloadDisplay::progress(const hub::DownloadProgress& p) {
    const uint64_t fetched = p.done - std::min(p.done, p.resumed_from);
    const double rate = p.seconds > 0 ? static_cast<double>(fetched) / p.seconds : 0;
    const std::string name = escape_for_terminal(p.name);
    if (p.finished) {
        bar_.finish();
        log_info(concat("minfer: downloaded ", name, ": ", format_mib(p.done), " in ",
                        format_fixed(p.seconds, 1), " s (", format_rate(rate), ")",
                        p.resumed_from > 0 ? concat(", resumed after ", format_mib(p.resumed_from))
                                           : std::string()));
        return;
    }
    std::string sizes =
        p.total ? concat(format_mib(p.done), " / ", format_mib(*p.total)) : format_mib(p.done);
    std::string eta;
    if (p.total && rate > 0 && *p.total >= p.done)
        eta = "  ETA " + format_duration(static_cast<double>(*p.total - p.done) / rate);
    const double fraction =
        p.total && *p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(*p.total) : 0;
    if (bar_.enabled()) {
        bar_.update(fraction, concat(name, "  ", sizes, "  ", format_rate(rate), eta));
        return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (last_line_.time_since_epoch().count() == 0) last_line_ = now;
    if (now - last_line_ < kLineInterval) return;
    last_line_ = now;
    log_info(concat("minfer: downloading ", name, ": ",
                    p.total ? concat(static_cast<int>(fraction * 100), "% (", sizes, ")") : sizes,
                    ", ", format_rate(rate), eta));
}

void DownloadDisplay::notice(const std::string& text) {
    bar_.finish();
    log_info(concat("minfer: ", text));
}

}  // namespace minfer::cli
