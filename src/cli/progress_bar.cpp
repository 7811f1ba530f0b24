#include "cli/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace minfer::cli {

ProgressBar::ProgressBar() : enabled_(::isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(double fraction, std::string_view label) {
    if (!enabled_) return;
    const int percent = std::clamp(static_cast<int>(fraction * 100.0), 0, 100);
    if (percent == last_percent_ && label == last_label_) return;
    last_percent_ = percent;
    last_label_ = label;
    constexpr int kWidth = 30;
    const int filled = percent * kWidth / 100;
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.append(static_cast<std::size_t>(kWidth - filled), '-');
    std::fprintf(stderr, "\r\033[K[%s] %3d%%  %.*s", bar.c_str(), percent,
                 static_cast<int>(label.size()), label.data());
    std::fflush(stderr);
}

void ProgressBar::finish() {
    if (enabled_ && last_percent_ >= 0) std::fprintf(stderr, "\r\033[K");
    last_percent_ = -1;
    std::fflush(stderr);
}

}  // namespace minfer::cli
