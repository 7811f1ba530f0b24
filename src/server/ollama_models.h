#pragma once
// ollama's answers about models (GET /api/tags, POST /api/show, GET /api/ps) for what the server
// serves. A model is named as ollama names them, NAME:TAG (the model's id, ":latest" added
// when it has no tag). Its "digest" identifies the file (a SHA-256 of its path, size and
// modification time), it is not the file's own hash: hashing gigabytes to list a model would
// hold the server for seconds.

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_file.h"
#include "runtime/loaded_model.h"
#include "server/model_catalog.h"

namespace minfer::server {

// A time as ollama writes it (RFC 3339, UTC).
std::string ollama_time(std::chrono::system_clock::time_point t);

// The name a model is listed under.
std::string ollama_model_name(const std::string& id);

// One entry of /api/tags (and, with expires_at and size_vram added, of /api/ps), from the file's
// header alone: a model need not be loaded to be listed.
nlohmann::ordered_json ollama_model_entry(const GgufFile& file, const std::string& id);
// The same for a catalogue entry; one whose file is not on disk (yet) or cannot be read is listed
// with what is known.
nlohmann::ordered_json ollama_model_entry(const CatalogEntry& entry);

// /api/show: the entry's details, the template, the model's metadata, its capabilities.
nlohmann::ordered_json ollama_show(const LoadedModel& m, const std::string& id, int64_t n_ctx);

}  // namespace minfer::server
