#pragma once
// Streamed text never shows the beginning of a stop string: text that might start one is held
// back until it is clear whether it does.

#include <string>
#include <string_view>
#include <vector>

namespace minfer {

class StopStringFilter {
  public:
    explicit StopStringFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    // Adds text; returns what can be shown now. Sets matched() when a stop string appeared (the
    // returned text then ends right before it).
    std::string push(std::string_view text);
    // What is still held back (at the end of generation, when no stop string matched).
    std::string flush();
    bool matched() const { return matched_; }
    // The stop string that appeared (empty before one did).
    const std::string& matched_string() const { return matched_string_; }

  private:
    std::vector<std::string> stops_;
    std::string held_;
    bool matched_ = false;
    std::string matched_string_;
};

}  // namespace minfer
