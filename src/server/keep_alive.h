#pragma once
// ollama's keep_alive: how long a model stays loaded after a request, as a Go duration ("5m",
// "1h30m", "90s", "0.5h") or a number of seconds; 0 unloads the model once the request ends, a
// negative value keeps it while the server runs. Used for --keep-alive and the request field.

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace minfer::server {

// Negative durations come back as -1 ms ("forever"). nullopt for what is not a duration (or one
// beyond ten years, which would overflow time arithmetic: write -1 for forever).
std::optional<std::chrono::milliseconds> parse_keep_alive(std::string_view text);
// The request field: a string as above or a number of seconds. Throws ApiError 400 naming the
// field for anything else.
std::chrono::milliseconds keep_alive_from_json(const nlohmann::ordered_json& value);

}  // namespace minfer::server
