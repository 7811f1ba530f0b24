#pragma once
// What the commands that run a model do with MODEL: load it with its tokenizer and chat template
// (runtime/loaded_model.h) showing a progress bar while the weights are read in on a terminal,
// and print one status line to stderr.

#include <optional>
#include <string>

#include "runtime/loaded_model.h"

namespace minfer::cli {

// template_file: a --template path, read before the model is loaded.
LoadedModel load_model_for_cli(const std::string& reference, bool quiet = false,
                               const std::optional<std::string>& template_source = std::nullopt);

}  // namespace minfer::cli
