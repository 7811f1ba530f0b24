#pragma once
// Number formatting shared by the commands' terminal output.

#include <cstdint>
#include <string>

namespace minfer::cli {

std::string format_mib(uint64_t bytes);          // "1.1 MB" (MiB, one decimal, as llama.cpp)
std::string format_count(uint64_t n);            // "260.1K", "494.0M", "1.10B"
std::string format_fixed(double v, int digits);  // "4.50"

}  // namespace minfer::cli
