#pragma once
// ollama's answers about models (GET /api/tags, POST /api/show, GET /api/ps) for what the server
// serves. A model is named as ollama names them, NAME:TAG (the server's alias, ":latest" added
// when it has no tag). Its "digest" identifies the file (a SHA-256 of its path, size and
// modification time), it is not the file's own hash: hashing gigabytes to list a model would
// hold the server for seconds.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/loaded_model.h"

namespace minfer::server {

// The name a model is listed under.
std::string ollama_model_name(const std::string& alias);

// One entry of /api/tags (and, with expires_at and size_vram added, of /api/ps).
nlohmann::ordered_json ollama_model_entry(const LoadedModel& m, const std::string& alias);

// /api/show: the entry's details, the template, the model's metadata, its capabilities.
nlohmann::ordered_json ollama_show(const LoadedModel& m, const std::string& alias, int64_t n_ctx);

}  // namespace minfer::server
