#pragma once
// "[#########-----------]  45%  label" on one terminal line of stderr, redrawn in place. Draws
// nothing when stderr is not a terminal, so redirected output stays clean.

#include <string>
#include <string_view>

namespace minfer::cli {

class ProgressBar {
  public:
    ProgressBar();  // enabled iff stderr is a terminal
    bool enabled() const { return enabled_; }
    // fraction in [0, 1]; redraws only when the shown percentage or label changes.
    void update(double fraction, std::string_view label = {});
    // Clears the line.
    void finish();

  private:
    bool enabled_;
    int last_percent_ = -1;
    std::string last_label_;
};

}  // namespace minfer::cli
