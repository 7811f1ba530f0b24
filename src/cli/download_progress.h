#pragma once
// What a download looks like on the command line: on a terminal, a bar redrawn in place (bytes,
// percent, speed, time left); otherwise one line every 5 seconds and one when a file is done, so
// that logs show progress without filling up. Notices (waiting for another process, a retry)
// are one line each. Everything goes to stderr.

#include <atomic>
#include <chrono>
#include <string>

#include "cli/progress_bar.h"
#include "hub/download.h"

namespace minfer::cli {

class DownloadDisplay {
  public:
    DownloadDisplay() = default;
    DownloadDisplay(const DownloadDisplay&) = delete;
    DownloadDisplay& operator=(const DownloadDisplay&) = delete;

    // Events that report here; `cancel` is the Ctrl-C flag (may be null).
    hub::DownloadEvents events(const std::atomic<bool>* cancel);
    // Clears the bar (before other output).
    void finish() { bar_.finish(); }

  private:
    void progress(const hub::DownloadProgress& p);
    void notice(const std::string& text);

    ProgressBar bar_;
    std::chrono::steady_clock::time_point last_line_{};
};

// "1.5 GB/s", "850.2 MB/s", "12.0 kB/s" (decimal units, as network speeds are given).
std::string format_rate(double bytes_per_second);
// "0:07", "1:02:03"
std::string format_duration(double seconds);

}  // namespace minfer::cli
